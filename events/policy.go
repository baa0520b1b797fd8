package events

// TypePolicyAction records a request a policy switch refused (D§3.6): every
// such refusal leaves a trace, as in pi-crew. It changes no projection.
const TypePolicyAction = "policy.action"

// Values of PolicyAction.Reason and PolicyAction.Policy.
const (
	ReasonWaitMethodsDisabled = "wait-methods-disabled"
	PolicyWaitMethodsOff      = "broker.waitMethodsEnabled=false"
)

// PolicyAction is the refused request: Action is its method (wait.request,
// wait.resolve), TaskID the caller's task.
type PolicyAction struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	Action string `json:"action" msgpack:"action"`
	Reason string `json:"reason" msgpack:"reason"`
	Policy string `json:"policy" msgpack:"policy"`
}
