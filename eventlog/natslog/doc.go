// Package natslog is crewlog's log on a NATS JetStream cluster: the commit
// point for crewds that span machines. Each crewd keeps its local Pebble log
// (package eventlog) as its materialised copy — records, stream index,
// outcome table, hash chain, snapshots, all unchanged — and the stream is
// the one truth they copy.
//
// # Layout in JetStream
//
//	stream <Stream>            file storage, Replicas (3 in production), no limits,
//	                           deletes and purges denied; subject crewlog.<Stream>.groups
//	  message seq n            one engine group: byte 1 (encoding version) | msgpack
//	                           [after uint, writes [...]] (group.go); after = the
//	                           position the group follows
//	KV crewlog_<Stream>_writer key "writer" = the holder's name; entries expire TTL after
//	                           their last write (the writer lease, lease.go)
//	subject crewlog.<Stream>.commands   requests followers forward to the writer
//
// # Guarantees
//
//   - A group commits whole or not at all: it is one message. Log.Commit
//     publishes it with the expected last sequence of the whole stream set
//     to the sequence the local copy holds — a fencing token: of two writers
//     that both believe they lead, at most one can store a group at that
//     sequence, and the other gets ErrFenced and appends nothing, anywhere.
//   - JetStream acknowledges a message once a majority of replicas stored
//     it; with sync_interval always (SyncAlways, which crewlog requires of
//     every server: StartServer sets it) each of them fsynced it first. Only
//     then is the group appended to the local copy and the commands of the
//     group answered.
//   - Before publishing, the group is checked against the local copy
//     (eventlog.Log.Check): a group the log would refuse (a duplicate
//     command id, an invalid event) never reaches the stream.
//   - Every copy appends the same writes in the same order with
//     eventlog.Log.AppendFrom, which records the stream sequence in the same
//     batch: copies have the same positions, stream versions, outcomes and
//     hash chain as the writer's, a restarted copier resumes after the last
//     group it holds, and a message that is not the next sequence, or does
//     not follow the copy's head, stops the copy (ErrDiverged) instead of
//     forking it.
//   - Recorded outcomes live in crewlog's outcome table in every copy,
//     forever; JetStream's duplicate window plays no part in idempotency.
//
// It does not elect: the lease only makes it rare that two crewds try to
// write (package cluster drives it); safety comes from the fence.
package natslog
