// Package cluster runs crewd as one of several sharing one NATS JetStream
// stream (eventlog/natslog): exactly one writer at a time, every other node
// a follower serving reads from its own copy.
//
// # Roles
//
//   - Every node keeps a local Pebble log that copies the stream and an
//     engine (commands.Engine) over it. A follower copies each group as
//     the stream receives it and folds it into its engine (Engine.CatchUp),
//     so queries, subscriptions and the dashboard work on every node and
//     never see an event before the stream acknowledged it.
//   - The writer holds the lease (natslog.Lease: a KV key created by
//     compare-and-set, renewed every TTL/4, expiring TTL after the last
//     renewal). On taking it a node first copies the stream to its last
//     sequence and folds it, then decides; its Committer publishes each group
//     as one JetStream atomic batch (its manifest, and its events on their
//     crewlog streams' subjects) with the expected last sequence of the
//     stream (the fence), then appends it locally and answers. It stages
//     (commands.StagingCommitter): the engine decides the next group while
//     a batch awaits its acknowledgement, and publishes it once that came,
//     or at once with Options.EarlyStaging, fenced with the stream's end as
//     it will be once the batches before it are stored (natslog, stage.go).
//     It is a commands.LongSyncer: a batch costs the replicas nearly as
//     much for one command as for a full group, so when a batch is
//     acknowledged the writer lingers, briefly and boundedly, for the
//     callers it answers before it publishes a nearly empty next group
//     (commands' pipeline.go). It is a commands.WriteChecker: a command
//     whose event no NATS message can carry is refused before it is
//     decided, not published to fail the writer. It is a
//     commands.HeadConfirmer: a group that appends nothing meets no fence,
//     so it is answered only once the stream is known to end where the
//     writer's copy does (natslog.Log.ConfirmHead, one request to the
//     stream's leader); a writer whose lease another node took, and that
//     has not learnt it yet, fails stop instead of answering from a state
//     behind the new writer's.
//   - A command submitted to a follower's engine is forwarded to the writer
//     over NATS (request/reply on crewlog.<stream>.commands) and answered
//     with the writer's reply (forward.go says why forwarding, not a
//     redirect). It carries the credential it authenticated with, which
//     the writer checks against the state it decides on: a credential
//     revoked, or whose worker's task or run ended, on the writer admits
//     nothing more through a follower whose copy lags, and the follower
//     answers the writer's *commands.CredentialEndedError, and its
//     refusals that decided nothing (commands.DecidedNothing: disk-full,
//     oversize-frame, replay-failed), as one crewd does. The credential travels in a header of the request's message,
//     beside its bytes, which a writer of the build before forwarded
//     credentials reads alone, deciding the request without the check as
//     it decided every one (commands' forward.go says why).
//
// # Failover
//
// A writer that dies stops renewing; after the TTL another node takes the
// lease, catches up and writes. A node renews the lease from the moment it
// takes it; a promotion that has made no progress for the stall bound
// (five TTLs, at least 10 s) is given up: the node fails and gives the
// lease up at once, so a node that cannot become the writer holds the
// lease no longer than that. Forwarded requests wait for it and are sent
// again with their command ids, so a client learns the recorded outcome of
// a command whose answer was lost, never a second decision.
//
// # Failing stop
//
// A node that must not go on — its commit was fenced (another writer
// appended), or a group that appends nothing found so before it was
// answered, its lease was lost while writing, its copy diverged — closes
// Failed, and a writer leaves the commands subject at once (the requests
// it was given are answered, not dropped), so that forwarded requests wait
// for the next writer, and gives the lease up, so that the next writer
// need not wait for its owner to close it or for the lease to expire. Its
// owner closes it and starts a new node on the same local log (a crewd
// exits and its supervisor restarts it): the new node resumes copying after
// the last group its log holds and rebuilds its state, so whatever the
// failed one had decided but not committed is gone, as a crash of a single
// crewd would leave it.
package cluster
