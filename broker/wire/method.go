package wire

// pi-crew's method names (D§7.5). Unknown methods are answered with NotImplemented; crewlog's engine methods are
// named by the broker that serves them.
const (
	MethodHello           = "hello"            // handshake; must be the first request and only once
	MethodPing            = "ping"             // result {"pong": true, "protocol": 1}
	MethodMsgSend         = "msg.send"         // append a mailbox message
	MethodMsgInbox        = "msg.inbox"        // page through the caller's inbox
	MethodEventsSince     = "events.since"     // page through the run's events
	MethodEventsSubscribe = "events.subscribe" // replay, then live team.event pushes
	MethodTaskWaitStatus  = "task.waitStatus"  // block until a task reaches a status
	MethodSteerPush       = "steer.push"       // orchestrator steering to a task
	MethodEscalate        = "escalate"         // follow-up message to a task
	MethodWaitRequest     = "wait.request"     // worker asks a question and waits
	MethodWaitResolve     = "wait.resolve"     // worker resumes after an answer
	MethodDelegateRequest = "delegate.request" // worker asks for a grandchild
)
