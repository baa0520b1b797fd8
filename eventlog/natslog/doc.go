// Package natslog is crewlog's log on a NATS JetStream cluster: the commit
// point for crewds that span machines. Each crewd keeps its local Pebble log
// (package eventlog) as its materialised copy — records, stream index,
// outcome table, hash chain, snapshots, all unchanged — and the stream is
// the one truth they copy.
//
// # Layout in JetStream
//
//	stream <Stream>            file storage, Replicas (3 in production), no limits,
//	                           deletes and purges denied, allow_atomic (atomic batch
//	                           publish, nats-server >= 2.12); subjects
//	                           crewlog.<Stream>.groups and crewlog.<Stream>.events.*
//	  one engine group = one atomic batch of n messages (batch.go), in sequence:
//	  seq s+1  crewlog.<Stream>.groups           the manifest: byte 2 | msgpack [batch id,
//	                                             after, n, writes [outcome, #events]];
//	                                             headers Nats-Expected-Last-Sequence: s
//	                                             (the fence), Nats-Batch-Id/-Sequence,
//	                                             Crewlog-Prev-Batch: the id of the batch
//	                                             it follows (none for a stream's first)
//	  seq s+2  crewlog.<Stream>.events.<token>   a chunk: byte 2 | msgpack [batch id, index,
//	  ...                                        crewlog stream, events [...]]: consecutive
//	  seq s+n                                    events of the one crewlog stream its subject
//	                                             names; the last has Nats-Batch-Commit: 1
//	  <token> = the crewlog stream's name when it is only A-Z a-z 0-9 _ - (every run
//	  id), else '~' + its bytes in unpadded base64url ("$engine" → ~JGVuZ2luZQ):
//	  reversible, never '.', '*', '>', a space or a leading '$', at most 341 bytes
//	  (subject.go). A group that wrote no events is its manifest alone, a plain
//	  publish. The first layout (one subject, byte 1 | a whole group per message)
//	  is still read by copies, and never written: a writer refuses such a stream
//	  and names the migration (migrate-store to Pebble, then to a new stream).
//	KV crewlog_<Stream>_writer key "writer" = the holder's name; entries expire TTL after
//	                           their last write (the writer lease, lease.go)
//	subject crewlog.<Stream>.commands   requests followers forward to the writer
//
// A JetStream consumer filtered on crewlog.<Stream>.events.<token> reads one
// crewlog stream's events (each chunk's in order); positions, stream
// versions and hashes are assigned by the copies, not stored.
//
// # Guarantees
//
//   - A group commits whole or not at all: it is one atomic batch, which
//     JetStream stores whole or not at all. Log.Commit publishes it with
//     the expected last sequence of the whole stream on its first message
//     set to the sequence the local copy holds — a fencing token, checked
//     when the batch commits: of two writers that both believe they lead,
//     at most one can store a batch at that sequence, and the other gets
//     ErrFenced with none of its messages stored, and appends nothing,
//     anywhere.
//   - The writer pipelines (stage.go): Log.Stage publishes a group while
//     the groups staged before it await their acknowledgement, fenced with
//     the stream's last sequence as it will be once they are stored, and
//     Staged.Wait, in Stage order, appends it to the local copy once
//     acknowledged. So the commit order is the Stage order, and a group is
//     stored only if every group staged before it is (else the stream does
//     not end where its fence expects). The first Wait that fails fails
//     every Wait after it until nothing is in flight — even one whose batch
//     was stored (the one before was in doubt): none of them reaches the
//     local copy or a client; the stream, a valid log, is copied by the
//     successor.
//   - A sequence is not a unique fence for a pipelined batch: a deposed
//     writer's second batch may find the stream ending exactly where it
//     expects, at the end of another writer's batch of the size of its
//     refused first. JetStream stores it, but its Crewlog-Prev-Batch names
//     the refused batch, not the last one in the stream: every copy takes
//     such a batch as void and skips it (copy.go), and the writer it
//     landed behind is fenced by it and catches up past it. A deposed
//     writer never appends to the log.
//   - A group that appends nothing has no batch to fence: Log.ConfirmHead
//     is the writer's barrier before it answers one (confirm.go). It asks
//     the stream's leader for the stream's last sequence, and passes when
//     that is the copy's, or when the message after the copy's last is the
//     first of a batch of this Log's (its next group, stored there only at
//     the copy's last sequence); anything else there is another writer's
//     (ErrFenced).
//   - A batch holds at most Config.MaxBatchMessages messages (the server's
//     max_batch_size, 1000 by default; crewd --nats-max-batch). A group that needs more is cut, at
//     command boundaries, into batches that each fit and commit one after
//     the other (every prefix of a group at a command boundary is a log
//     the writer could have committed; a failure between two of them fails
//     the writer stop as any commit error does); a single command that
//     does not fit a batch is refused before anything is published
//     (ErrGroupTooLarge). The engine asks CheckWrite about each command's
//     write before deciding it (commands.WriteChecker), and refuses one
//     that does not fit, or whose event is larger than one message of the
//     server's, instead of failing stop when its publish fails.
//   - JetStream acknowledges a batch once a majority of replicas stored
//     it; with sync_interval always (SyncAlways, which crewlog requires of
//     every server: StartServer sets it) each of them fsynced it first. Only
//     then is the group appended to the local copy and the commands of the
//     group answered.
//   - The writer appends an acknowledged group to its local copy unsynced
//     (eventlog.Log.AppendFromUnsynced): the stream, fsynced by a majority,
//     is what makes it durable, and a second fsync per group awaited on the
//     writer's machine would only lengthen every group's round (the copy's
//     next append awaits it, so that a failed write of the WAL fails the
//     copy stop instead of reaching no one). A crash of the writer's
//     process or machine may lose a suffix of the groups its copy held,
//     whole and in order, with their stream sequence; on its
//     next start the copy resumes from the last group it still holds
//     (Open reads it back, CatchUp and Follow copy the rest), and a crewd
//     becomes the writer only after CatchUp. Followers' copies
//     (CatchUp, Follow) append synced.
//   - Before publishing, the group is checked against the local copy
//     (eventlog.Log.Check): a group the log would refuse (a duplicate
//     command id, an invalid event) never reaches the stream.
//   - Every copy reassembles each group from its batch and appends the same
//     writes in the same order with eventlog.Log.AppendFrom, which records
//     the sequence of the group's last message in the same batch: copies
//     have the same positions, stream versions, outcomes and hash chain as
//     the writer's, and a restarted copier resumes after the last group it
//     holds. A message that is not the next sequence, a group that does
//     not follow the copy's head, and anything that is not a whole batch
//     of crewlog's (events without their manifest, a group cut short by
//     the next manifest or the stream's end, a message of another batch or
//     at another index, events on another crewlog stream's subject) stop
//     the copy (ErrDiverged) instead of forking it. A void batch (above) is
//     read whole, checked as any batch is, and skipped, by every copy.
//   - Recorded outcomes live in crewlog's outcome table in every copy,
//     forever; JetStream's duplicate window plays no part in idempotency.
//   - Every JetStream API call of a start (the stream's creation or info,
//     the read of the batch the local copy ends with, the lease bucket,
//     the copy's consumer) fails after 10 s whatever the caller's
//     deadline: a reply lost while NATS moves a leader fails the start,
//     for the supervisor to start crewd again, instead of holding it.
//     Within those 10 s, all of them but the consumer are asked again
//     while JetStream answers that it is temporarily unavailable (no meta
//     or stream leader yet): that answer says nothing was done. The read
//     of the last batch, a direct get from the stream's replicas (crewlog's
//     streams allow them), is also asked again while no replica answers it
//     (no responders), or only one that has not applied it yet (message
//     not found: the copy holds it, so the stream has it).
//
// It does not elect: the lease only makes it rare that two crewds try to
// write (package cluster drives it); safety comes from the fence.
package natslog
