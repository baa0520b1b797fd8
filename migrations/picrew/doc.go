// Package picrew imports the file state of a pi-crew crew root (the shapes
// of reference D§1–§3) into a crewlog store, as crewlog events appended
// directly with eventlog.Append (it may import only events and eventlog,
// like its parent package, so it uses neither commands nor projections).
//
// # What it reads, per run under state/runs/<runId>/
//
//   - manifest.json → run.created, and the run's status
//   - tasks.json (a bare array, or the {schemaVersion, tasks} envelope) →
//     task.created for workflow tasks (kind "workflow"); the final status,
//     times, usage and allocation of every task, shadows included
//   - events.jsonl and its archives events.jsonl.<ts>.archive.jsonl, merged
//     by metadata.seq → the run, task, delegate, budget-warning and ask
//     events crewlog has (delegate.admitted also yields budget.reserved)
//   - mailbox/{inbox,outbox}.jsonl, mailbox/tasks/<taskId>/{inbox,outbox}.jsonl
//     (and their archives, read before their live file) with mailbox/delivery.json → mailbox.appended,
//     mailbox.delivered, mailbox.acknowledged, each message in its file's
//     mailbox (a task's inbox: the task; an outbox or a run-level file: the
//     run's inbox), whatever its line names (reported when it differs)
//   - artifacts/<runId>/steering/<taskId>.jsonl → steer.pushed after the
//     steer message (the run's own artifacts directory, D§1, whatever the
//     manifest's artifactsRoot says: see below); a line under the id of a
//     message of another mailbox than its task's is skipped and reported
//
// pi-crew's event log is lossy (compaction keeps the last 1,000 events), so
// the state files are the truth for where things ended: after the events, a
// reconcile step per run appends what the history lacks so the imported
// run, tasks, delegations and allocations end as the files say (a shadow
// task whose delegate events were lost becomes a task.created of kind
// "shadow": its parent is unknown, so it holds no slot).
//
// # Guarantees
//
//   - Idempotent: every write has a deterministic command id
//     (import:<runId>:<what>) and ids already in the command-id table are
//     skipped, so a second import of the same files appends nothing, and an
//     import of files that grew appends only what is new.
//   - Nothing pi-crew wrote is dropped: an event type without a crewlog
//     counterpart (task.progress, hook.executed, policy.action, …) is kept as
//     foreign.imported with its type, seq, time, task, message and data (its
//     JSON text, each byte that is not UTF-8 as U+FFFD, as in every text
//     decoded from JSON); it changes no projection, and the timeline, replay
//     and events.since show it (RunSummary.Foreign counts them).
//   - Tolerant and loud: corrupt lines, task records of tasks.json and
//     message states of delivery.json that do not decode (each is its own:
//     one bad value leaves the others in), event and mailbox lines and task
//     records whose runId names another run than their directory's (a
//     worker's copy, which takes no id from the run's own records: a
//     message so skipped is none of the run's, its delivery state records
//     nothing and a steering line under its id gets a message of its own), seq
//     gaps and duplicates, quarantined .corrupt-* files, lock and sidecar
//     files and unknown files are skipped and each is listed in the
//     Summary (of the entries of a run's directories of one kind that are
//     none of its files, the first 64 each, the others by their count:
//     maxStrayReports); so is a record the store cannot
//     take (an id that makes its command id too long, a payload above the
//     store's limit), and the rest of its run is imported; nothing is
//     dropped without a line saying so.
//   - Files as pi-crew writes them, and nothing else: a run's files are
//     written by its workers too, so what pi-crew never writes is refused.
//     A file that is not a regular file (a named pipe, a device, a
//     socket, a symbolic link, which may name another run's file) is
//     reported and not read, as if absent (a Follower keeps what it read
//     of it before); opening one never waits (a named pipe with no writer
//     would hold the reader, and with it a Follower's every run).
//     manifest.json, tasks.json and delivery.json are read whole up to
//     16 MiB each (maxWholeFile: pi-crew rewrites them whole at every
//     change, and a real run keeps them far smaller), once per change; a
//     larger one is reported and not read the same way (a Follower
//     refuses it by its stat, without opening it). Of delivery.json
//     the states of 10,000 messages are kept (maxDeliveryStates, pi-crew's
//     own bound), those of the run's messages (read so far, by a follower)
//     first, then of other ids, the most advanced of each (acknowledged,
//     then delivered, then the others, the first named of each), the others
//     reported and their messages' states taken from their mailbox lines.
//     Of a run's event-log archives, its mailbox files and its steering
//     files, the first 2,048 of each kind in the order they are read
//     (maxRunFiles) are read, the others reported and not read.
//     A run's directories are written by its workers too: below
//     state/runs and artifacts every directory of a path is opened
//     relative to the one opened before it, without following a link
//     (openat with O_NOFOLLOW: crewRoot), so a symbolic link in place of a
//     run's directory, its mailbox, a task's mailbox or its steering
//     directory, there before a listing or put there between the listing
//     and the open, is reported and nothing is read through it, as if
//     absent: nothing under one run's directory makes the reader open a
//     file of another run, or one outside the crew root. A pass (and an
//     import) holds state/runs, artifacts and the directory of the run it
//     reads open until its end, so a look at a file opens only the
//     directories below the run's; a run's directory replaced by a link
//     during the pass is not looked up again, and the next pass meets the
//     link. state/runs and artifacts themselves are opened through an
//     os.Root of the crew root, which a link there may not leave. No path is built from what
//     a file holds: every name joined is one listed (a run id or task id
//     of pi-crew's charset, runIDPattern) or one of pi-crew's own.
//     A run's steering files are read from artifacts/<runId>/steering
//     only: a manifest's artifactsRoot naming another directory (another
//     run's, say, whose steers would become this run's) is reported and
//     ignored (one naming artifacts/<runId> under another path of the
//     root, a root copied from elsewhere, without a line), and a symbolic
//     link in place of either directory is reported and not followed.
//   - A file or directory of a run that is there but cannot be read (a
//     failing disk, a full descriptor table: readFailed), or whose read
//     stops midway, is reported and never taken as absent or empty: the
//     import does not import the run (nothing of it recorded, the run in
//     Summary.Unread; an import once it can be read imports it whole), and
//     a Follower reads it again at its next pass (from where it was: a read
//     back of a file's last line that fails is no rewrite), taking no file
//     it could not list for removed, holding a steering line whose message
//     it may hold, and reconciling the run only once every file of it was
//     read.
//   - Times: a pi-crew time (unix ms, or RFC 3339) that crewlog's events
//     cannot carry — before 1970, after 2255 (maxTimeMs), a string that
//     is not RFC 3339, any other value — is listed and taken as absent,
//     and its record imported: an event without a time gets its run's
//     createdAt, and with neither it is recorded at the clock of what
//     records it (the import's Options.Clock, the daemon's for a
//     Follower). A time later than the clock of what records it is
//     recorded at that clock (what counts from an event's time, a
//     deadline or a run's wait for a slot, would move with it). A
//     delegation's deadline counts from the time its admission is
//     recorded at, whichever it is (a Follower's daemon counts it when
//     the time is its own: commands.Import). Its timeoutSec that puts its
//     deadline past that range is taken as absent (pi-crew's default) the
//     same way, and so is one above 86,400 s, which pi-crew and crewlog's
//     own delegate.request refuse (the admission holds a slot of the
//     daemon's nested pool until its deadline). A question's deadline
//     more than 3600 s after the time it is recorded at, which pi-crew's
//     broker never writes, is taken as that bound and reported: only the
//     engine clock ends a question nobody answers. Both ways of importing
//     decode every time with the one rule (flexTime), so they record the
//     same events.
//   - A manifest's text field, budgetWarning, budgetAbort or budgetUnlimited
//     of another JSON type than pi-crew writes is taken as absent and
//     reported as written, the rest of the manifest read (decodeManifest).
//   - A field of a task record of tasks.json of another JSON type than
//     pi-crew writes (a usage, allocation or waiting as a whole, one of its
//     values being so) is taken as absent and reported as written, the rest
//     of the task read (decodeTask); a record that is no object, or has no
//     usable id, is left out.
//   - Values crewlog's own commands bound: a manifest's budgetTotal outside
//     0..2^53 or no integer ("abc", 1.5: the rest of the manifest is read)
//     and a budgetWarning or budgetAbort outside [0,1] are taken as
//     absent and reported, as run.create refuses them, and so are a task's
//     depth and an admission's childDepth outside 0..10 (task.create's
//     bound: a shadow's depth decides its credential); a task's usage in
//     tasks.json with a counter below zero or above 2^40, or a cost below
//     zero, is refused whole, as task.usage refuses such a report, and
//     reported (a negative one lowered the run's budget use below what its
//     other tasks spent); a task's dependsOn keeps the ids of 1..256 chars,
//     and of those the first 1024 (task.create's bound), each cut reported;
//     a line naming a task, a delegation, a question or a message by an id
//     longer than 256 chars, or than 256 bytes as JSON writes it (one of 256
//     '<' was larger alone than a frame of 1 KiB, and each read that met it
//     answered oversize-frame for good), is skipped, and a message's
//     questionId or data.subId so long taken as absent, reported
//     (events.ImportedIDOK, events.ImportedQuestionIDOK); a message's
//     kind, priority or deliveryMode that is none of the words pi-crew
//     writes (events.MessageKindOK, PriorityOK, DeliveryModeOK: nothing
//     else bounds it, and one of 60,000 '<' was larger than any frame) is
//     taken as absent, the default, reported; a task of
//     tasks.json, or an admission's subId, named parent, all, group or
//     orchestrator (events.TaskIDReserved: names task.create refuses, as
//     msg.send reads them as a group of mailboxes) is left out with its
//     lines, a task mailbox directory or a steering file so named is not
//     read, and a delegation or question line with an empty taskId (the
//     run inbox's mailbox key) skipped, each reported; a delegation's
//     admission or settlement, or a question line, whose taskId is no task
//     of tasks.json (pi-crew's broker writes one only for a task it found
//     there: a workflow task or a shadow) is skipped and reported, as a
//     task event's is, and so is a steering line, or a line of the inbox, of
//     a task tasks.json lacks (crewlog's steer.push and msg.send refuse
//     one); a delegation's request or rejection (written before the broker
//     looks the task up) is imported as it is;
//     an allocation with a count below zero, a spend above 2^40 or a grant
//     above 2^53 (the budgetTotal a grant is seeded from) is left out, and an
//     admission reserving less than nothing, or more than 2^40, is skipped,
//     so spend never decreases and never saturates. An event whose seq is
//     past the largest int64 (what foreign.imported records) is skipped. A
//     question's options are kept when they are 1..16 strings of 1..256
//     chars (pi-crew's R5, crewlog's wait.request); an empty list is none,
//     and any other list is left out, the question kept, and reported. A
//     delegate.admitted whose subId is not a task id tasks.json may hold,
//     or names a workflow task (crewlog mints a subId, which names its
//     shadow task), is skipped and reported, with its settlement: it took
//     the workflow task for its shadow, and its settlement ended it. A free
//     text longer than crewlog's own command that records it takes (a
//     question over wait.request's 8192 chars, a title, an error, a body,
//     a steer, a goal: events.ImportedTexts) is cut to that bound, its
//     beginning kept and a mark of how long it was, and reported.
//   - A task's allocation is reconciled to the spend tasks.json shows from
//     what the log holds, not from the history read (reconcile:allocation,
//     events.ImportTopUpSubID): a compacted history lacks admissions whose
//     reservations the log holds, and they were counted twice.
//   - A waiting task is parked on an open question, as crewlog's
//     wait.request parks one (task.waiting with its ask.requested): when
//     the history lacks the question's ask.requested (compacted, or a
//     task.waiting alone), the reconcile records it from the waiting record
//     (reconcile:ask:<taskId>:<questionId>; no text, which only that event
//     carries), so the engine clock ends it at its deadline; a task waiting
//     on a question answered or timed out already is recorded resumed
//     (task.resumed, reconcile:resume:…) and reported: nothing would ever
//     move it on. A question id no wait.resolve takes (none, or more than
//     128 chars) parks nothing: a task.waiting or ask.requested line of one
//     is skipped and reported (a follower reconciles a live run only once
//     it has finished, and the task would wait until then; crewd's
//     import.append refuses them), and a waiting record of one in
//     tasks.json is reconciled running, reported.
//   - One run's files change no other run: a run directory whose id names
//     a run of the store created through crewd's socket (it has an
//     orchestrator credential, which no import records) is reported and
//     not imported, as crewd's import.append refuses every write to it; a
//     delegate.admitted whose subId holds a slot of another run's
//     delegation in flight (the daemon-wide slot pool is keyed by subId: it
//     took that run's slot, and its settlement freed it), or that its run
//     admitted already (a line compaction dropped, imported before: its
//     reservation was counted twice), or that names a workflow task the
//     store holds of its run (one a rewritten tasks.json no longer lists:
//     the delegation's settlement ended it), is skipped and reported, as
//     crewd's import.append refuses it; the store's task and delegate
//     events are read once for it, at the import's first admission not
//     recorded already.
//   - A run's writes commit in one atomic append. NB: so the import holds
//     the run it imports whole (its events, messages with their bodies,
//     steers and the writes planned from them): its memory follows the
//     size of the largest run's JSONL files, bounded per line (maxLine),
//     per whole file (maxWholeFile) and per count of files (maxRunFiles),
//     not in total, which a run's workers decide. A Follower reads
//     maxTailRead of a file a pass and holds maxPending writes of a run,
//     though its planner keeps the ids of a live run's records.
//
// Import does not lock the pi-crew root (pi-crew must not be writing it)
// and it needs the store exclusively (eventlog.Open's directory lock).
//
// # Following a root while pi-crew writes it (Follower)
//
// A Follower imports the same records with the same command ids, but
// through a running daemon (Sink: the import.append and import.checkpoints
// methods of its socket, with the admin credential; DaemonSink), and keeps
// importing as pi-crew writes: a notification (fsnotify) or a poll (every
// second, every 250 ms without notifications) makes it look at the runs.
//
//	pi-crew files ──notify/poll──▶ pass: per run, read what changed
//	  manifest.json, tasks.json, delivery.json
//	    (whole files ≤ 16 MiB: read once when their inode, size or mtime moves)
//	  events.jsonl (+ archives), mailbox, steering (JSONL: read from the offset after the last complete line)
//	        │ planner (the one-shot import's mapping, kept per run)
//	        ▼
//	pending writes ──import.append (≤128 and ≤128 KiB a call, in order)──▶ crewd ──▶ recorded under import:<runId>:…
//	        │ all answered
//	        ▼
//	import.checkpoint per file (≤ 1 per 10 s): path, inode, size, offset, hash of the last line (whole file)
//
// Guarantees:
//
//   - No duplicate: every write's command id names its source record (the
//     run, a task, an event's seq, a message id, a delivery state, a steer,
//     an end state), so a write sent twice — an answer lost with a restarted
//     daemon, a restarted follower, a file read again after a truncation or
//     a rotation, the one-shot import run before or after — is answered
//     replayed and appended once. A source record mapped differently on a
//     second reading (a shadow's title read before tasks.json named it) is
//     refused as a reused id: the first import stands, and it is reported.
//   - No gap: a line is planned once it is complete, the writes go in file
//     order and stay pending until the daemon answered them (retried at
//     every pass while it is unreachable), and a file's checkpoint is
//     written only when every write of its run is answered, so a checkpoint
//     never covers a write the log lacks.
//   - Resume: at start the follower loads the checkpoints (one that cannot
//     be, a negative offset say, is reported and its file read again from
//     the start). A finished run
//     whose files all match them (same inode, read to the end, the same
//     last line or content) and whose manifest was checkpointed reconciled
//     is not read at all until a file changes. A live run's JSONL files are
//     read up to their checkpoints only to rebuild the planner (pi-crew's
//     compaction keeps them to about 1,000 events), nothing of it sent
//     again but run.created and the tasks; the rest is imported as new.
//     An archive rotated while no follower ran resumes from its live
//     file's checkpoint when it matches it (the same inode, the line read
//     last where it was), and is then checkpointed under its own name.
//   - A finished run (manifest completed, failed or cancelled) is
//     reconciled with its files, as the one-shot import does, once its files
//     have been still for SettleAfter (2 s); once its checkpoints are
//     written it is let go (dormant, as if found settled at start), so
//     memory holds the live runs only, and looked at again at a
//     notification naming it or every tenth pass (dormantEvery, polling
//     or not), so a pass costs little of the runs that finished; a run
//     with maxPending writes, or maxPendingBytes of lines read, waiting
//     for the daemon is not read further until the daemon takes them.
//   - Never fatal, always reported (once, while the follower keeps the
//     report: the last maxReported/2 at least, reportedOnce): a partial
//     last line waits for its newline (reported only if it stays so, in
//     a file that does not grow, for SettleAfter: a reader can find a line
//     cut while its write is still going on; read again only once the
//     file's size changes); a
//     corrupt line is skipped; a file whose inode changed
//     (rotation, compaction), that shrank below what was read (truncation),
//     or whose last line read is no longer where it was (rewritten in
//     place) is read again from its start; an archive renamed from the live file
//     goes on from the live file's position, and a run's archives are read
//     before its live file (they hold its older seqs: a rotation leaves the
//     lines appended just before it there), as a mailbox's archives are read
//     before its live file (they hold its older messages); a run directory removed (by
//     pi-crew's retention) keeps what was imported and gets its checkpoints
//     marked gone; a write the daemon refuses is reported and not retried,
//     and so is one larger alone than a request may carry (MaxBatchBytes:
//     the broker client refuses a frame over its cap).
//
// Not guaranteed: the order of writes across runs, and events pi-crew
// compacted away before the follower read them (the reconcile supplies the
// end state, as for the one-shot import). A steering line waits for its
// mailbox message until each mailbox file of its run was read to its end
// (or found replaced or rewritten) in a pass after the one that read the
// line, or up to the size it had at the end of that pass, then gets a
// message of its own; a steer's mailbox line
// read after that (pi-crew writes it first) is recorded too, under the
// import's ids, but the message crewd holds is the steer's
// (docs/picrew.md).
package picrew
