package events

import (
	"reflect"
	"slices"
)

// kind describes one event type: its current schema version and how to make a
// zero payload.
type kind struct {
	version uint16
	zero    func() any
}

func v1[T any]() kind { return kind{version: 1, zero: func() any { return new(T) }} }

func v2[T any]() kind { return kind{version: 2, zero: func() any { return new(T) }} }

// registry is every event type of the contract. NB: it is read-only after
// package initialisation; nothing may add to it at run time.
var registry = map[string]kind{
	TypeRunCreated:       v1[RunCreated](),
	TypeRunQueued:        v1[RunQueued](),
	TypeRunPlanning:      v1[RunPlanning](),
	TypeRunRunning:       v1[RunRunning](),
	TypeRunBlocked:       v1[RunBlocked](),
	TypeRunCompleted:     v1[RunCompleted](),
	TypeRunFailed:        v1[RunFailed](),
	TypeRunCancelled:     v1[RunCancelled](),
	TypeRunBudgetWarning: v1[RunBudgetWarning](),
	TypeRunBudgetAbort:   v1[RunBudgetAbort](),
	TypeRunQuotaExceeded: v1[RunQuotaExceeded](),

	TypeTaskBudgetFairShare: v1[TaskBudgetFairShare](),

	TypeTaskCreated:        v2[TaskCreated](), // v2: kind (upcast.go)
	TypeTaskStarted:        v1[TaskStarted](),
	TypeTaskCompleted:      v1[TaskCompleted](),
	TypeTaskFailed:         v1[TaskFailed](),
	TypeTaskCancelled:      v1[TaskCancelled](),
	TypeTaskSkipped:        v1[TaskSkipped](),
	TypeTaskNeedsAttention: v1[TaskNeedsAttention](),
	TypeTaskRetried:        v1[TaskRetried](),
	TypeTaskWaiting:        v1[TaskWaiting](),
	TypeTaskResumed:        v1[TaskResumed](),
	TypeTaskUsage:          v1[TaskUsage](),

	TypeDelegateRequested:       v1[DelegateRequested](),
	TypeDelegateAdmitted:        v1[DelegateAdmitted](),
	TypeDelegateRejected:        v1[DelegateRejected](),
	TypeDelegateSpawned:         v1[DelegateSpawned](),
	TypeDelegateCompleted:       v1[DelegateCompleted](),
	TypeDelegateFailed:          v1[DelegateFailed](),
	TypeDelegateTimedOut:        v1[DelegateTimedOut](),
	TypeDelegateCancelRequested: v1[DelegateCancelRequested](),
	TypeDelegateCancelled:       v1[DelegateCancelled](),

	TypeBudgetReserved: v1[BudgetReserved](),
	TypeBudgetCharged:  v1[BudgetCharged](),

	TypeMailboxAppended:     v1[MailboxAppended](),
	TypeMailboxDelivered:    v1[MailboxDelivered](),
	TypeMailboxAcknowledged: v1[MailboxAcknowledged](),
	TypeSteerPushed:         v1[SteerPushed](),

	TypeAskRequested: v1[AskRequested](),
	TypeAskAnswered:  v1[AskAnswered](),
	TypeAskTimedOut:  v1[AskTimedOut](),

	TypePolicyAction: v1[PolicyAction](),

	TypeForeignImported: v1[ForeignImported](),

	TypeImportCheckpoint: v1[ImportCheckpoint](),

	TypeCredentialIssued:  v1[CredentialIssued](),
	TypeCredentialRevoked: v1[CredentialRevoked](),

	TypeEngineConfigured: v1[EngineConfigured](),

	TypeJobCreated:                 v1[JobCreated](),
	TypeJobStatusChanged:           v1[JobStatusChanged](),
	TypeJobRootsReset:              v1[JobRootsReset](),
	TypeJobRejected:                v1[JobRejected](),
	TypeLeaseOpened:                v1[LeaseOpened](),
	TypeLeaseCleared:               v1[LeaseCleared](),
	TypeProxyRequested:             v1[ProxyRequested](),
	TypeProxyRejected:              v1[ProxyRejected](),
	TypeProxyCompleted:             v1[ProxyCompleted](),
	TypeProxyCancelled:             v1[ProxyCancelled](),
	TypeManifestRevalidated:        v1[ManifestRevalidated](),
	TypeManifestRevalidationFailed: v1[ManifestRevalidationFailed](),

	TypeStoreMigrated: v1[StoreMigrated](),
}

// typeOf maps a payload struct type back to its event type. Every event type
// has its own payload struct, so the mapping is one to one.
var typeOf = func() map[reflect.Type]string {
	m := make(map[reflect.Type]string, len(registry))
	for t, k := range registry {
		m[reflect.TypeOf(k.zero()).Elem()] = t
	}
	return m
}()

// sortedTypes is Types' answer, computed once.
var sortedTypes = func() []string {
	ts := make([]string, 0, len(registry))
	for t := range registry {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}()

// Types returns every known event type, sorted. The slice is a fresh copy.
func Types() []string { return slices.Clone(sortedTypes) }

// IsKnown reports whether t is an event type of the contract.
func IsKnown(t string) bool {
	_, ok := registry[t]
	return ok
}

// SchemaVersion returns the current schema version of t, or 0 when t is
// unknown.
func SchemaVersion(t string) uint16 { return registry[t].version }

// NewPayload returns a pointer to a zero payload struct of t, or nil when t
// is unknown.
func NewPayload(t string) any {
	k, ok := registry[t]
	if !ok {
		return nil
	}
	return k.zero()
}

// TypeOf returns the event type whose payload p is (a payload struct or a
// pointer to one); ok is false for anything else.
func TypeOf(p any) (t string, ok bool) {
	rt := reflect.TypeOf(p)
	if rt == nil {
		return "", false
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	t, ok = typeOf[rt]
	return t, ok
}
