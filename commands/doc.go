// Package commands decides every state change of crewlog and writes it.
//
// Two layers:
//
//   - Decide(state, command, env) is pure: given the read models as of the
//     latest durable position, a command, and an Env (the engine config in
//     force, a clock reading, an id source, the caller), it returns the
//     events to append and the answer, or a *RejectedError carrying the
//     reason and the wire code. Time and ids that influenced a decision are
//     recorded in its events, so replaying a log gives the same state on any
//     machine, and a recorded decision can be re-run to explain it.
//   - Engine is the single writer of DESIGN.md: commands queue; one
//     goroutine decides a group of them against the working state (each sees
//     the effects of the ones before it) and hands all their events to the
//     log as one synced batch; a second goroutine, the publisher, waits for
//     the batch to be durable, publishes the new state and answers every
//     command of the group. The two form a pipeline (pipeline.go): while a
//     group's fsync is in flight, the writer decides the requests that
//     arrive into the next group, against a working state that already
//     holds the first one's effects, and hands that group to the log once
//     the fsync has returned.
//
// # Guarantees
//
//   - A command's events commit atomically or not at all, and its answer
//     comes only after they are durable. A rejection that the policy decided
//     (delegate.rejected) is recorded in the same way.
//   - The pipeline (pipeline.go) holds at most two groups handed to the log
//     and not yet published. A group is decided against the state of every
//     group decided before it, durable or still in flight; the log assigns
//     positions, stream versions and the hash chain in the order the groups
//     are decided, and makes them durable in that order (a group is durable
//     only if every group before it is). Nobody — no answer, no reader of
//     the published state, Head, Changed, RunChanged, a Tap, the log's readers
//     (bounded by its durable head) and its outcome lookups — sees a group
//     before that group and every group before it are durable: the
//     publisher publishes the groups one at a time, in order, each once its
//     sync has returned. A retry of a command whose group is in flight is
//     answered as that command, once its group is published. With a
//     Committer that cannot stage (StagingCommitter, commit.go) one group
//     is in flight at a time, as without a pipeline. An EarlyStager (the
//     replicated backend, with cluster.Options.EarlyStaging) is handed each
//     group as soon as it is decided, while the one before still awaits its
//     sync; the order and failure rules are the same. With a LongSyncer
//     (the replicated backend, whose sync is a round trip to replicas) the
//     writer may keep a nearly empty group open after the sync before it
//     returned, for the callers that sync answered, until it holds as many
//     commands as that group had callers: the linger, never longer than
//     the sync just measured nor maxLinger (5 ms) past the sync's return,
//     and never for a caller alone (pipeline.go). It delays a hand-off, never a guarantee: the
//     order, durability and failure rules are the same.
//   - Command ids belong to their principal (SPEC §2, Request.Principal):
//     the recorded outcome is keyed by (principal, CommandID) and records
//     the request's fingerprint (SHA-256 of the method and the canonical
//     msgpack of the parsed command, fingerprint.go). The same principal, id
//     and fingerprint is answered with the recorded outcome — the same
//     result fields or the same code, reason and message — forever, across
//     restarts; a retry never causes a second admission. The same principal
//     and id with another request is refused bad-params
//     ("commandid-reused") and nothing is recorded. Another principal's id
//     is never looked at. Within one group, and across the groups in flight
//     whose outcomes the log does not serve yet, the same rules hold: a
//     second equal request follows the first's answer (and is answered when
//     the first is durable), a different one is refused.
//     A delegate.settle whose text its caller cut to fit its readers
//     (DelegateSettle.SentText) is fingerprinted as sent, and its retry also
//     matches an outcome fingerprinted as cut, what a build before SentText
//     recorded (cutFingerprint).
//     An outcome moved from a format-2 store has no fingerprint and answers
//     any retry of its principal, as it did. The one exception is an outcome
//     that wrote no event past its principal's MaxEventlessOutcomes, or a
//     worker's past its run's MaxEventlessOutcomesPerRun (eventless.go): it
//     is answered but not recorded, so a retry of its id is decided again.
//     A request its caller refused (Request.Refused) is answered the id's
//     recorded outcome if there is one, else the refusal, nothing decided
//     or recorded; a follower of a cluster answers it from its own copy,
//     and a cluster's writer decides it as one crewd does
//     (WriterForwarder).
//   - Engine.SubmitAll queues a batch in order and answers it in order: the
//     writer decides its commands in that order (a later one sees the
//     earlier ones' effects), usually in one group. Import (import.go) is
//     how another runtime's recorded history enters the log through the
//     daemon: its events keep their source time, only a runtime's history
//     types are accepted, and the broker submits it under the engine
//     principal with the source record's id, the one-shot import's.
//   - The engine's own commands (clock expiries, config, imports) are the engine
//     principal's, which no client credential maps to, so a client naming
//     its id "expire:<run>:<subId>" claims nothing of the engine's. An
//     engine command that changes nothing (an expiry submitted before it
//     is due, or one of something already settled) is not
//     recorded: the next tick decides it again, so every delegation expires
//     within one tick after deadline + grace whatever ids clients send.
//   - Read sees a published state that holds exactly the durable groups,
//     never an undurable event: the fold of the log up to its position,
//     never a group in part, and after a failed sync the state published
//     before it, unchanged (publish_test.go); readers never hold up the writer's
//     decisions, and hold up the publication of the next group for at most
//     their own query (the publisher folds a group into the published copy
//     under its write lock, and the writer decides against a copy of its
//     own). A
//     query of a cold run reads it back from the log inside that query
//     unless Warm read it into the cache first (the broker does, outside the
//     lock, once the caller may read the run, and charges the caller the
//     events Warm says it re-folded).
//   - Hot and cold (tier.go, projections/tier.go): runs that have not ended,
//     and ended runs for Options.Retention after their last event (at most
//     MaxRetainedRuns of those, the latest to end), are held whole; the others go cold (at most one pass a second, an
//     idle writer included) and are read back from the log when asked for. Before it
//     decides a command the writer faults in the run the command names, and
//     before it applies an event the event's run, so Decide and Apply always
//     see whole runs; the published copy faults in, applies and evicts the
//     same runs in the same order as the writer's, group by group. Runs go
//     cold only once every group before is durable (the writer waits for
//     the pipeline to empty then, at most once a second), since a cold run
//     is read back from the log. Start-up (projections.LoadTiered) reads
//     the snapshot, which holds the hot runs (the cold runs' summaries are
//     in the log's index of summaries, written as they go cold, whether or
//     not views are; a start-up that finds the index short of the runs the
//     snapshot relies on it for drops both and rebuilds from position 1,
//     LoadInfo.IndexRebuilt),
//     plus the tail, faulting in the cold runs the tail touches; a fold from
//     position 1 makes ended runs cold as it goes, by event time. The
//     records of each run that goes cold are written as its view
//     (projections/coldview.go) by a background pass after the eviction
//     (one at a time, waited for by Close), never on the write path;
//     Options.NoViews turns the views off (not the index).
//   - Snapshots (snapshot.go) are taken in the background, off the write
//     path, when the events since the last one reach max(SnapshotEvery,
//     k × its size in records) with k = 2 (projections.State.SnapshotRecords,
//     NextSnapshotAt), or at once when 64 runs went cold since it (not
//     counting a run read back and made cold again with no event of it
//     since: State.EvictAllCounted). So the
//     snapshot work is amortised over the events written: every snapshot
//     but the last was followed by at least k × its records of events, and
//     the records all snapshots encode are at most events/k plus the last
//     one's, however large the hot state grows. Start-up reads the newest
//     snapshot and folds the tail after it, at most max(SnapshotEvery,
//     k × the snapshot's records) events: once the snapshot outgrows
//     SnapshotEvery, start-up costs at most (1 + k) = 3 × the snapshot's
//     own load (an event folded costs about a record decoded). No snapshot
//     starts while one is saved, so one that comes due then is taken with
//     the next group, or by Close when none comes: after a clean stop the
//     bound holds; after a kill -9 in that window the tail may be longer by
//     the events written while one snapshot was saved.
//   - A commit error makes the engine fail stop (ErrFailed): nothing more is
//     decided or handed to the log, nothing more is published, every command
//     of every group in flight is answered ErrFailed (whether or not its
//     group reached the disk: a retry after the restart learns which), and
//     the state is rebuilt from the log on restart. Failed is closed then,
//     so the daemon can exit for its supervisor to restart it. The engine
//     fails stop too when its log does for a write the writer did not make
//     (a view's, a flush): at once when the writer waits for work, else
//     after stuckWriterGrace (2 s, log_failed.go), as the writer may be held
//     inside the log for good (Pebble holds its commit back after a failed
//     flush); the commands waiting for that writer, or for room in its
//     queue, are answered ErrFailed then, their outcome unknown as above, as
//     is a catch-up (CatchUp) waiting for it, and Close still waits for it.
//   - With Options.Space, a command submitted while the disk is below its
//     free-space minimum is answered ErrNoSpace before it is decided: nothing
//     is recorded, so the same CommandID retried later is decided then. The
//     check runs in Submit, outside Decide, which stays pure. The engine's own
//     expiries are refused alike (Tick): the next tick once space is back
//     expires them. No snapshot is saved meanwhile, in the background or at
//     Close (the reserve is the log's), so the start-up bound above may be
//     passed until space is back; nor is a view of a cold run or its summary
//     in the index, whether an eviction pass, a read back or the pass of the
//     missing views writes it (tier.go: maybeSaveViews,
//     projections.ColdStore.HoldWritesWhile): the first eviction pass once
//     space is back writes them.
//   - With Request.MaxResultBytes, an accepted command whose result JSON
//     would be longer is answered ErrResultTooLarge before its events are
//     applied or written: nothing is recorded, so a caller that cannot
//     deliver an answer (a frame too small for it) never commits a change
//     its client does not hear of, and the same CommandID may be sent again
//     with more room.
//   - With Request.Credential, the writer checks the secret the request
//     authenticated with against the state it decides the request on, and
//     answers a *CredentialEndedError before deciding when it was revoked
//     or replaced, or a worker's task or run has ended or its task was
//     retried since the attempt it said hello in (Credential.Attempt):
//     nothing is recorded, so no command of a credential is recorded after
//     the event that ended it, whatever the broker saw when it handed the
//     request on (TestACommandOfAnEndedCredentialIsNotDecided). A request
//     forwarded to another engine carries its credential beside its bytes
//     (EncodeCredential), so a writer checks it against its own state
//     however far behind the follower's copy is, and the follower hears the
//     same *CredentialEndedError (DecodeReply); a writer of the build before
//     forwarded credentials reads the bytes alone, as it read every
//     forwarded request (forward.go).
//   - Tests hold the commit path at its points (hooks.go: decided on the
//     writer, durable and published on the publisher;
//     eventlog.Options.BeforeSync between hand-off and sync) to check, with
//     several submitters in one group and with the next group decided while
//     one syncs, that nobody is answered and nothing is published before the
//     group is durable.
//   - Delegation expiry is driven by the engine clock as ordinary commands
//     (delegate.expire), so it is recorded, replayable and survives crashes.
//   - Event times (engine_time.go): the engine decides and dates its events by the wall clock (Options.Clock), but
//     never by a time before one it decided by already, nor before the time of the last event in its log when it
//     opened, nor of one a follower caught up: the events the engine decides are dated in log order, though the wall
//     clock steps back while crewd runs or crewd starts on a host whose clock is behind the log (where the log ends
//     with imported events, dated earlier, a restart holds to the last one's time only). While the wall clock is
//     behind, the engine's time goes on from its last by the monotonic clock, at 15/16 of its pace: a deadline, the
//     message-rate window, a run's wait for a slot and the retention of ended runs count time as it passes (a
//     fifteenth slower at most), not the step, and the wall clock meets the engine's time again sixteen times the
//     step later. A step forwards cannot be told from time passing (a host resumed from sleep steps forwards
//     rightly): what fell due by then (a delegation's deadline and grace, a question's deadline) is due at the next
//     tick; a wrong step forwards set right is a step back as above, and the events dated in the meantime stay as
//     dated. A wall clock more than an hour behind (maxHold) is followed as it reads, the events it dates before the
//     ones ahead of them: a wrong step forwards of a day, set right, would otherwise have every event dated up to a
//     day ahead for sixteen days. Imported events keep their source's time (never later than the engine's), so only
//     the events the engine decides are ordered by time: readers that resolve a time to a position (audit.PositionAt)
//     take the longest prefix of the log dated at or before it.
//   - The commit step is a seam (commit.go): Options.Committer makes each
//     group durable (default: the log's Stage and Wait, pipelined). A replicated backend
//     commits the group to its replicated log first and then appends it to
//     the engine's log, which stays the materialised copy every read,
//     outcome lookup and snapshot uses; a Committer that is a WriteChecker
//     refuses, before a command is applied, a write its log cannot take
//     (the command is refused bad-params). Options.Forwarder takes a request
//     away before it is decided (a follower forwards it to the writer), and
//     CatchUp (follow.go) folds events another writer committed into the
//     state and publishes them, so a follower serves queries and
//     subscriptions from its own copy.
//   - DescribeMethod reports, for a method of the table, the roles it admits,
//     whether it refuses unknown params keys, and every key its parse
//     function reads with the key's JSON type — read off the parse function
//     itself (run on a recording reader), so the protocol description the
//     broker generates (docs/protocol.json) follows every change to a parse
//     function. TestDescribeMethodMatchesParse checks it against ParseCommand.
//
// # delegate.request (SPEC §4.1)
//
// Checks, in order: task-scoped worker credential (forbidden) → params
// (bad-params) → run exists (no-manifest) → nesting enabled
// (delegate.rejected nesting-disabled, policy-disabled) → mint the subId →
// parent exists (no-task) → parent running, its run not ended and, for a
// delegation, not asked to cancel (parent-not-running, bad-params) → role, trust, depth, slots, the run's slot
// share, its worker's slot share under workerSlotShare (fair_slots.go), budget (metered) or unmetered-denied, model
// catalog, timeout, workspace overlap (all policy-denied). Everything from
// the subId on is one batch: delegate.requested followed by
// delegate.rejected, or by delegate.admitted and (metered) budget.reserved.
// Every rejection records the policy inputs it saw (events.Policy). Any role
// string is a valid request (the role gate decides it); what is recorded of
// it is cut to MaxRecordedRoleChars. Messages are pi-crew's text, numbers
// printed as JavaScript prints them.
//
// A task is a delegation's shadow task iff it was created as one (kind
// shadow on task.created v2, or by delegate.admitted): projections.Task.Shadow
// is the one definition that budget abort, msg.send "all", task.transition
// and credential.issue use. task.create makes workflow tasks only.
//
// # Jobs, executor leases and proxied calls (job*.go, D§9)
//
// pi-task-dispatcher's rules T1–T20 as commands on a job of a run (the
// manager is the run's orchestrator or the admin; the worker is the job's
// task, and a worker's proxy commands name only its own job). job.create
// checks the grant (T1–T3) and records each tool's fingerprint; lease.open
// opens the one lease (T5) by start or continue (from paused only, T6,
// after revalidating the grant, T4); job.transition and lease.clear clear
// it, revoking its root into the run's bounded set (saturating it when full,
// T18) and aborting its calls. proxy.request checks, in order, the request
// id (T8), the nonce (T7, a digest compared in constant time), replay (T9)
// and the per-job limit (T10) — the id is in the durable seen-set from
// there on —, status and lease (T11), grant (T12), in-flight (T13) and size
// (T14). manifest.revalidate lets one admitted call execute (T4) or
// hard-stops the job; proxy.complete delivers a result only under the lease
// that admitted its call, else records it fenced (T15); proxy.cancel is
// honoured only for a live call of the current lease (T16); job.disconnect
// fails the pending calls (T19). A lease never outlives its worker's
// credential: the event that ends the worker (its task terminal, its
// delegation settled, its run terminal, its credential revoked) is followed
// in its batch by the lease's clearing (lease.cleared worker-ended, the same
// clearing lease.clear records), whatever command decided it
// (endWorkerLeases, applied to every decision), and lease.open refuses a job
// whose worker has ended (worker-ended). Every refusal of a rule is recorded
// with what it saw (job.rejected, proxy.rejected); the limits are the engine
// config's (projections.Config.JobLimits: the dispatcher's constants by
// default).
//
// # Free text (text_bounds.go)
//
// Every string bound counts chars, Unicode code points (longerThan), the
// unit of the protocol description's maxLength: a client's check in UTF-16
// units (JavaScript's .length) is never looser. Only a commandId counts
// bytes, the event log's bound on ids; ids of [A-Za-z0-9_-] are ASCII.
// Every free-text param a command records is bounded in chars, whatever the
// frame size: the free text of a status change (run.transition's summary
// and reason, task.transition's error and reason, delegate.cancel's reason)
// by MaxStatusTextChars, which holds the longest pi-crew writes (a task
// error quoting a worker's captured stderr), a cwd by MaxCwdChars, and the
// rest by the bounds next to their commands. Decide refuses a longer one
// bad-params naming the field and the bound, and cuts nothing; a recorded
// refusal that quotes client input (a grant's rule message) is cut to
// MaxRejectionMessageBytes. A delegate's result text is cut to
// MaxResultChars by the fence (D§6.2), as pi-crew does; one its caller cut
// to fit its readers' frame (DelegateSettle.SentText) is followed by a
// note of that cut after the fence when the cut leaves the note room
// (DelegateSettle.resultBody).
//
// # Run quotas (quota.go)
//
// Decide measures the decision of a command that grows a run (msg.send,
// escalate, steer.push, delegate.request, wait.request, task.create,
// job.create, proxy.request, proxy.cancel) or that a client can repeat
// without winding the run down (task.usage, credential.issue, lease.open; a
// run or task transition that is not toward the end; proxy.complete of a
// call no longer current) and
// replaces it by a quota refusal (quota-exceeded, rate-limit) when the run
// would pass its events, bytes or message-rate quota. The check reads
// only the state, the config and Env.Now; a refusal records
// run.quota_exceeded at most once per run per minute. Commands that settle
// or wind a run down are never refused by a quota, and each can happen only
// a bounded number of times (a delegation settles once, a lease clears once
// per open): a run at its quota can always take every task to a terminal
// status (a queued task through running), itself from blocked through
// running to completed, and settle or cancel every delegation. A refusal of
// any method that records nothing but itself (policy.action, job.rejected,
// proxy.rejected) is measured like the gated commands. So no client can
// grow a run's stream past its events quota by more than the bounded
// wind-down of what it holds (TestLoopsAreBoundedByTheEventsQuota,
// TestARunAtItsEventsQuotaCanFinish), nor loop text into it past its
// bytes quota (TestLoopsAreBoundedByTheBytesQuota,
// TestARunPastItsBytesQuotaCanFinish). A wind-down that would take its run
// past the bytes quota keeps at most ClipStatusBytes of each status text,
// marked, so ending the many tasks a run may hold adds a line each
// (TestWindDownsPastTheBytesQuotaKeepALineOfText).
// A run holds at most MaxLiveTasksPerRun workflow tasks that have not
// ended (live_tasks.go): a budget abort ends all of them in one decision,
// which the bound keeps to a few thousand events
// (TestABudgetAbortEndsAtMostMaxLiveTasksPerRun). Decisions that read the
// run's tasks that have not ended (a budget abort, a worker's message to
// its group, an executor delegation's overlap check) walk only those
// (projections.State.EachLiveTask), and a message to all stops past
// MaxRecipients, so none costs more for the tasks the run has ended
// (TestDecisionsWalkOnlyTheLiveTasks).
//
// # Budget (SPEC §4.2)
//
// Metered iff the run is not budgetUnlimited and the parent has an
// allocation or the run a budgetTotal (a defined 0 included); the grant is
// seeded once; the reservation is the spend, never refunded; usage above the
// reservation is charged at settlement. Usage counts are bounded
// (MaxUsageTokens) and every ledger sum saturates, so tokensSpent never
// decreases.
//
// The seed depends on the engine config's budget mode. picrew (the
// default): every task without an allocation, a shadow task too, is seeded
// with the run's budgetTotal, as pi-crew 0.11.46, so spend across depths is
// not bounded by it. nested: a shadow task's grant is the reservation its
// parent made for it, the run's workflow tasks share one pool of
// budgetTotal, and a settlement charge stops at what the parent may still
// spend (the rest is recorded as uncharged), so a run's total spend never
// exceeds budgetTotal.
//
// Run budget enforcement (task.usage, D§4.4): a report that reaches the
// abort threshold records run.budget_abort and its consequences only; one
// that reaches the warning threshold (and not the abort) records
// run.budget_warning, once; a report that takes its task above half of
// budgetTotal records task.budget_fair_share. After an abort, a report
// records only itself while the run stays ended; a run reopened after its
// abort is held to the same budget, and a report that reaches the abort
// threshold aborts it again. Explicit thresholds, 0 included, are kept;
// absent ones default to 0.8 and 0.95.
package commands
