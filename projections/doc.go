// Package projections holds crewlog's read models and folds events into them.
//
// # Guarantees
//
//   - State is a pure fold: Apply(state, event) does no IO, reads no clock,
//     uses no randomness and never iterates a map where the order could show
//     in a result. The same events in the same order give the same State on
//     any machine; the same code runs live, at start-up and during replay.
//   - Apply does no validation: commands validate before events exist. It
//     never panics on well-formed events; an event that refers to something
//     missing is ignored, and first-wins rules (a second run.created, a second
//     terminal delegate event, a duplicate message id) keep the state sane.
//   - Progress is a position, never a timestamp: State.Position is the
//     position of the last applied committed event.
//   - Every read model is derived from events alone: runs, tasks (shadow tasks
//     included), delegations, the budget ledger, the nested slot pool (held =
//     admitted and not terminal, so it survives restarts; a subId is one
//     run's at a time), mailboxes, asks,
//     credentials (digests only, with who issued and revoked them and why),
//     the engine config in force, and each run's usage for its quotas and
//     the slot pool's fairness (Run.Usage: events, message bytes, the bytes
//     of its events' other strings, when it last waited for a slot;
//     fairness.go), and what each task's worker appended to its run as the
//     events' actor, with, under the config's ShareByDelegator in force at
//     each event, the workers of the delegations it started and the
//     messages delivering their results, for its share of the events and
//     bytes quotas (Task.ActorEvents, ActorBytes; actor_usage.go), and,
//     under WorkerSlotShare, when each task last waited for a slot and the
//     slots each holds with its delegations, for its worker's share of its
//     run's slots (Task.SlotWaitAt, Delegation.ShareHolder;
//     worker_slots.go).
//   - Paged queries (TasksPage, DelegationsPage, LedgerPage, Mailbox,
//     AsksPage, CredentialsPage, Runs) take a cursor that is an ordinal into
//     an append-only list, so it stays valid while the run grows. A run's
//     page costs the page, not the run (they run under the engine's read
//     lock): the list is walked in place from the cursor, only the page is
//     copied, and a filtered total (pending asks, unacknowledged messages) is
//     kept as the list changes (pendingIndex), not counted per read; a
//     pending page finds its entries through that index, not by a walk over
//     the settled ones between them. An account's history, which may hold
//     most of its run, is copied whole by LedgerPage; LedgerPageWithin
//     copies it only up to its reader's bound, and gives an account past it
//     without its history.
//   - A task is a shadow task iff it was created as one (Task.Kind, from
//     task.created v2 or delegate.admitted); Task.Shadow is the only test.
//   - Token sums (the ledger, a run's budget use) saturate instead of
//     wrapping, and a ledger amount below 0 adds nothing: tokensSpent never
//     decreases, whatever a log holds. A run's budget use is the sum of what
//     its tasks' last reports count, each counter within
//     0..events.MaxUsageTokens (Usage.Budgeted), whatever a log records.
//   - Queries are methods on *State, return copies (never internal pointers)
//     and list in a deterministic order: creation order, or sorted keys.
//   - Clone is a deep copy of the hot runs; two copies fed the same events
//     stay equal. Copies share the ColdStore and the cold runs' summaries,
//     which nothing mutates.
//   - Runs lists every run in creation order, hot and cold alike, with
//     cursors that are creation ordinals; the summaries of cold runs come
//     from the index of summaries (runindex.go), read as of the state's
//     Position, merged with the runs in memory, so the page is the one the
//     same state would give with every summary in memory. A filter of
//     statuses none of which has ended reads no index.
//   - Hot and cold (tier.go): a run is hot (whole in memory) unless it went
//     cold through Evict, which only an ended run holding nothing
//     daemon-wide (no slot, no pending question, no parked wait; an ended
//     run waits for no slot) may. Of a cold run the state keeps nothing but
//     a count: its summary (its Run record, the position of its last event,
//     its creation ordinal and its orchestrator credential) is written to
//     the log's index of summaries when it goes cold (runindex.go,
//     eventlog.SaveSummaries, when the store writes the index: Tiering.Index,
//     which the engine sets whether or not it writes views; in memory only
//     while it cannot be written: a read-only log, a failed write, retried
//     at the next eviction pass, after which every copy lets go of it),
//     versioned by that position and read as of the
//     state's Position, so a state rebuilt from an older snapshot sees each
//     run as it was then. LoadTiered checks the index against the state
//     (the count of runs it records, O(1), and the hot runs it also holds)
//     and, when it is wanting (removed by hand), drops it with the snapshot
//     and folds from position 1, which writes it again
//     (LoadInfo.IndexRebuilt). It does not see a single summary removed
//     by hand while the index's count stayed: the state does not hold the
//     cold runs' ids, so that needs a walk of the index, O(runs), and
//     start-up must not grow with the history; crewctl verify walks it
//     (audit.Verify) and reports it. Until the index is rebuilt (remove its
//     keys, or the snapshot, and restart) such a run answers as unknown,
//     and a command naming it is decided as for an unknown run. Run,
//     RunStatus and the orchestrator's Credential answer from the summary
//     (one read of the index, no re-fold, so a hello is checked before it
//     costs one); the rest is read back from the log when asked for (ColdStore): from
//     the run's view (coldview.go: its records as the fold left them,
//     written when it went cold, used only when stamped with the position
//     the summary names; the store knows which cold runs have no view
//     written — more went cold at once than its queue holds, or a write
//     failed — and the snapshot keeps that set, so the engine writes them
//     in the background: MissingViews, WriteMissingView), else re-folded (the run's stream merged with the
//     engine stream, up to that position, through the same Apply), so every
//     query answers for a cold run exactly what it answers for the same run
//     hot. The runs read back last stay decoded in a cache bounded by count
//     (DefaultColdCache) and estimated bytes (ColdCacheBytes). Daemon-wide state (slots, slot waiters, config)
//     involves hot runs only. A cold run that cannot be read back (a log
//     error) is never answered as a partial run: the accessors without an
//     error (Run, Task, Credential, …) answer it as an unknown run, and
//     ColdStore.Err and ReportErrors say why; Warm, FaultIn, the Lookup*
//     accessors, the pages of a run's records, Runs, EachJob, JobPage and
//     Authorize return the error (ErrNotReadBack), so that the engine and
//     the broker refuse a request naming the run rather than answer or
//     decide it as if the run held nothing.
//   - RunAt (RunAtFrom) folds any one run the same way up to any position:
//     the run's records are the full fold's there, O(the run) not O(the
//     log), but for an admission of a subId another run held, which the
//     full fold ignores and no decision records; its daemon-wide records
//     hold that run only (AssumePool sets the pool a recorded decision saw,
//     for re-running it). It stops within 256
//     events of its context ending, with the context's error and no state.
//   - Apply never reads the log: an event of a cold run must be preceded by
//     FaultIn (Replay and the engine do it); Apply ignores an event whose run
//     is not hot. Whole returns the state with every run hot, for tests and
//     tools that compare states.
//   - LoadTiered makes ended runs cold while it folds (by event time, once
//     per second of it, and at least every 4,096 events: times go back in
//     log order after an import), so a fold from position 1 never holds
//     every run.
//   - Replay cost is O(1) map work per event, with allocations only for what
//     an event adds (a record, a list entry).
//
// # Time
//
// Every timestamp in a read model (createdAt, admittedAt, deadline, ...) is
// unix milliseconds; createdAt/updatedAt-like fields come from Event.Time.
//
// # Snapshot format
//
// EncodeSnapshot writes two msgpack values: the format version (uint16,
// SnapshotFormat = 14) and a map
//
//	{position, config, runCount, ords, missingViews, runs: [{run, last, cold, tasks, delegations, accounts,
//	  messages, asks, credentials, rootSpent, jobs, revokedRoots, noView}]}
//
// runs lists the hot runs and the cold runs whose summary is not in the
// index (none, once it is written), by creation ordinal (ords, one each);
// runCount is the number of runs ever created, missingViews the cold runs
// whose view is not known to be written. A cold run listed is stored as
// {run, last, cold: true, credentials: [its orchestrator's, when issued],
// noView} alone: its records are re-folded from the log. So the snapshot
// grows with the active work, not with the history. DecodeSnapshot reads
// this format alone, and a view's decoder likewise (SnapshotFormat says
// why): an older snapshot or view is refused, and the state or run
// re-folded.
// Every list is in the state's own order, so the encoding is
// deterministic. Only primary records are stored; indexes (slots held,
// mailbox boxes, order slices, pending tallies) are rebuilt on decode by the fold's helpers,
// and DecodeSnapshot(EncodeSnapshot(s)) equals s exactly (but for the
// ColdStore, which Load and Replay attach). Decoding is
// defensive: bad bytes give ErrBadSnapshot, never a panic or a runaway
// allocation. The field-by-field reader (below) allocates only as far as the
// bytes left can back a length, and reflection runs only after a structural
// check (every declared length backed by real bytes, bounded nesting). SnapshotEncoder writes the same
// bytes in one pass, in pieces, from a copy of the records taken while the
// state is held still, so the daemon encodes a snapshot straight into the
// chunks that store it. A cold run's view is the format version followed by the run's
// record of this map (hot, whole). The bytes are msgpack's reflection
// encoding of that map; the hot records (tasks, delegations, accounts,
// messages) are appended field by field (snapshot_codec.go), byte for byte
// as reflection writes them, so encoding reads s without copying or
// changing it and is safe under a reader's lock. A snapshot and a view are
// read back the same way (snapshot_decode.go: into exactly what reflection
// decodes; anything it does not know or would decode otherwise — a key met
// twice, a length the bytes cannot back, nesting past the bound — is left
// to reflection). The storage layer adds the checksum;
// a snapshot is an optimisation only, and rebuilding from position 1 must
// give the identical state.
//
// # Jobs (jobs.go)
//
// A dispatcher job (D§9) is a sub-entity of its run: its events are in the
// run's stream, so it is folded, snapshotted, made cold and read back with
// the run. A job keeps its grant (names, fingerprints, callables), its
// nonce's digest, its lease (generation, root, active), and its seen-set of
// request ids, never pruned while the job lives and bounded by the
// per-job request limit the decision enforces. The run keeps its bounded
// set of revoked lease roots and the saturated flag; Authorize answers the
// nested-call question of T17/T18 from them. Proxied arguments and results
// stay in their events only (the state keeps their sizes and the position
// of the delivered result).
//
// # Import checkpoints (importcheckpoints.go)
//
// The newest import checkpoint of every file (the $import stream) is no part
// of the State: only a follower's start reads it. It is read from the
// stream's view plus the checkpoints after it, and the view saved again
// once a read folded ImportViewEvery of them, so the read costs one decode
// per file plus a bounded tail, not one per checkpoint ever written; a view
// that does not fit the stream is ignored and the stream folded from its
// start, which gives the same answer.
//
// # What it does not do
//
// It does not decide anything (commands do), enforce transition tables, store
// secrets or delegate prompts (the prompt stays in the delegate.admitted
// event, found through Delegation.AdmittedPosition), or lock: a State is
// owned by one goroutine at a time.
package projections
