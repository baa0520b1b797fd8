// Package broker is crewlog's unix-socket server: pi-crew's broker protocol v1 (D§7, SPEC §5), wire-compatible so a
// pi-crew runtime can use it, plus crewlog's engine methods and queries for the runtime. It decodes NDJSON frames
// (package wire), authenticates connections against the credential digests in the projections, maps each method
// to a command (commands.ParseCommand + Engine.Submit) or a query (Engine.Read), and streams the event log to
// subscribers. docs/protocol.md describes every method; a test keeps the two in step. docs/protocol.json is the same
// description for programs (roles, params with types and bounds, result shapes, codes, pushes), generated from the
// method table by `go generate ./broker` (Describe, protocol_spec.go); TestProtocolJSONCurrent fails when it is
// stale, and the TypeScript client (clients/typescript) generates its method table and types from it.
//
// # Connection lifecycle
//
//	accept ──(peer neither our uid nor in SocketGroup, by SO_PEERCRED)───────▶ close, no frame
//	  ├─────(MaxConns+AdminConns reached; MaxConns, another uid's)─▶ error too-many-connections (id "") ─▶ close
//	  │
//	  ▼ start reader + writer goroutines; read deadline = HelloTimeout
//	awaiting hello ──(deadline, EOF, oversize/malformed/truncated line)──────▶ close, no frame
//	  │         ├──(first request not hello)──▶ error protocol "hello required" ─▶ close
//	  │         ├──(bad shape / unknown token)─▶ error auth | stale-token | revoked ─▶ close
//	  │         ├──(a connection limit)────────▶ error too-many-connections ─▶ close
//	  │         └──(its pace too far away)─────▶ error too-many-connections ─▶ close
//	  ▼ hello ok (once its process's bucket, its credential's and a worker's run's hold a unit, waited for
//	    max(HelloTimeout, MinHelloPaceWait) at most, and re-checked as it is indexed, against the same published
//	    state): ack {protocol:1,
//	    session, run, ok:true}; deadline cleared; idle timer armed; indexed by run
//	authenticated ◀────────────────────────────────────────────┐
//	  │ before each read: wait while the credential's bucket, or a worker's run's, is empty (RatePerCredential,
//	  │                   RatePerRun; pacer.go)
//	  │ each request: credential re-checked (revoked / stale-token ─▶ error ─▶ close), and again in every read
//	  │               of the state its method makes
//	  │               second hello ─▶ error protocol "hello already completed" ─▶ close
//	  │               id too long to answer in a frame ─▶ error protocol (id "") ─▶ close
//	  │               oversize/malformed/truncated line ─▶ charged as a request of its bytes ─▶ close, no frame
//	  │               dispatch ─▶ result | per-request error ───┘ (connection stays)
//	  │ pushes: team.event (subscription), mailbox.message (feed), resync (once, on overflow)
//	  │ credential ended (revoked, re-issued, worker's run or task terminal) ─▶ error (id "") ─▶ close
//	  │ IdleTimeout without a request, subscription or wait ─▶ error idle-timeout (id "") ─▶ close
//	  ▼
//	closed: EOF, read/write error, write stalled > 10 s (slow consumer), Server.Close, recovered panic
//
// Every connection has exactly one reader goroutine (wire.Reader with the MaxFrame cap, dispatching requests in
// order) and one writer goroutine (draining a bounded outbound queue with a write deadline; a response finding the
// queue empty and the socket idle is written by the goroutine answering it, under the same deadline; what the
// socket takes at once is written without arming the deadline, which only a write that waits needs), plus at most
// one subscription goroutine and a bounded number of task.waitStatus waiters. Server-wide: one feed goroutine
// following the log (mailbox pushes, ending connections whose credential ended) and one wait follower per run with
// waiters.
// All are tracked by the server's WaitGroup; Close returns only when every one has ended. Close reasons are an
// enum, logged at debug.
//
// # Guarantees
//
//   - No client can block another, the engine or the server: pushes only append to a connection's queue; only the
//     connection's own goroutines (its writer, or its reader or a waiter writing a response to an idle socket)
//     block on its socket, one at a time, for writeTimeout at most. A connection's reader reads its next request
//     only once its own connection's queue has room (back-pressure on that client only), and the answer then goes
//     in, counted against the budgets even beyond them; neither a response nor a push waits with a frame.
//   - events.subscribe delivers every event type (optionally filtered) in seq order (seq = the event's version in
//     the run's stream), replay then live, never repeating or skipping one; it reads only durable events. On
//     overflow it sends ONE {"event":"resync","data":{"fromSeq":N}} (N = first seq not delivered), stops, and
//     the connection stays authenticated; the ended subscription counts no more toward its credential's
//     MaxSubscriptionsPerCredential (releaseSubscription), from before the frame is queued.
//   - mailbox.message pushes follow durability (the feed takes the published events from the engine's Tap, and
//     what the tap dropped from the log) and are best effort; a connection is pushed only messages published after
//     its hello (earlier ones are msg.inbox's), and never before its hello's answer, which is the first frame an
//     accepted hello's connection carries.
//   - A credential's end takes effect within one frame: every request of a worker or orchestrator connection
//     re-checks its credential by the digest of the secret it authenticated with, and when a published event may
//     end credentials of a run (revocation, re-issue, the run or a task terminal) the feed re-checks the
//     connections it may end (the run's end: all of the run's; a credential issued or revoked: those of its key;
//     a task's end or a delegation's settlement: that task's or shadow task's workers') and ends the refused ones
//     with ONE error frame (id "": revoked or stale-token), after the answer
//     of a request being served; an ended connection gives back its places (connection, waits, subscription) and
//     its bytes of its credential's and its run's outbound and inbound budgets as it ends, not once that frame is
//     written, which a client that reads nothing holds for up to the write timeout (giveBackEnded). A subscription checks the credential against the state it reads up to, so no
//     event published with or after the change is pushed; a method's every read of the state checks the
//     credential in that same read (call.read), so a page read (events.since, msg.inbox, query.*, proxy.result),
//     which may wait for its credential's turn as long as the client keeps the turns busy, answers nothing
//     published with or after its end, and events.since reads the log only up to the published position of its
//     check; waits and the subscription end with the connection, and a task.waitStatus checks the credential
//     against a state at least as new as the reading that decided its answer, so none decided with or after the
//     end is sent, even before the feed has ended the connection. A hello checks its credential and is indexed for
//     pushes under one read of the published state, so an end published before it is refused and one after it is
//     the feed's to act on before it pushes later mail.
//     Orchestrators survive their run's end (pi-crew exempts them), not a revocation.
//   - Wake only who cares: a subscription waits on its run's signal (commands.Engine.RunChanged), a
//     task.waitStatus waiter on its task's status (waitHub): a commit of another run, or one that moves no waited
//     task, wakes none of them.
//   - Limits per principal (limits.go), each refusal an error frame with its own code, never a reset: connections
//     (MaxConns of every principal but the admin, which has AdminConns places more of its own, and ReservedConns of
//     them kept for the admin and orchestrators; MaxConnsPerRun of a run's workers; MaxConnsPerCredential; each
//     place taken as a hello authenticates, before it waits for its pace, which it does for the longer of
//     HelloTimeout and MinHelloPaceWait at most:
//     too-many-connections), waits (MaxWaitsPerConn,
//     MaxWaitsPerCredential: too-many-waits), subscriptions (MaxSubscriptionsPerCredential: too-many-subscriptions),
//     idle connections (IdleTimeout: idle-timeout). Page reads (events.since, msg.inbox, query.*, proxy.result)
//     take turns per credential (MaxReadsPerCredential), so a token's connections share the CPU of that many
//     readers; a read gives its turn back once its answer is rendered, before it is written, so a connection that
//     does not read its answers holds none (readPage); the turns are kept only for credentials reading or waiting
//     to (package broker/internal/turns), not for every credential that ever read.
//   - CPU per principal (pacer.go): every credential but the admin's is served at most RatePerCredential units a
//     second with bursts of BurstPerCredential, and the workers of one run together, whatever their credentials, at
//     most RatePerRun with bursts of BurstPerRun (the run's orchestrator is paced by its credential alone, so its
//     workers' requests do not spend its budget; the events they write cost it what it reads of them, as below); a
//     request is one unit and one more per frameUnit (4 KiB) of its frame and the blank lines before it, a hello
//     helloCost (50) more (a refused one, or a first frame that is no hello, to its process, by pid), each event
//     events.since reads (returned, or the one past its page) or a subscription reads (pushed or filtered out, the
//     one past a pull: at maxScan, or not published yet, or the first it would push, which events.subscribe reads to
//     learn that the log gives it back) one more, and each event of a cold run re-folded from the log for it
//     (params.go, and withToken for a retried command whose secret is checked against the run's records; a hello
//     never re-folds: classifyCold; events.since reads a run's events from the log and never reads a cold run back),
//     charged to the worker's run as well. A credential with an empty bucket, or a worker whose run's bucket is
//     empty, is not refused: its connections' readers read no next frame, its subscriptions pull nothing and its
//     hellos are not answered until it refills, so a flood is back-pressured by the flooder's own socket and costs
//     the daemon no CPU while it waits; only a hello that would wait longer than the longer of HelloTimeout and
//     MinHelloPaceWait is refused (too-many-connections): at once, charged to its process, for its credential's or
//     run's pace; once that wait has passed, uncharged, for its process's. Blank lines count toward the frame cap of
//     the request after them (package wire), so no stream of them is read unpaid.
//   - Secrets: the broker mints tokens (see mintToken) and hands each only to the caller of run.create or
//     credential.issue; the engine and the log see sha-256 digests. No token reaches a log line or an error.
//   - Command ids belong to their caller (SPEC §2): a command's principal is the connection's authenticated
//     identity (admin; orchestrator of its run; worker of its task), never anything in params, so no client can
//     reach another principal's recorded outcomes or the engine's. A worker is shown the commandId of its own
//     commands only (events.since, subscriptions); the orchestrator and the admin see every id they may read.
//   - A client cannot make the daemon panic (a recovered panic closes that connection only; a Pebble fatal error,
//     eventlog.FatalError, met on the server's goroutines is never recovered: crewd exits), nor grow memory
//     without bound: frames ≤ MaxFrame; a connection's outbound bytes (queued plus the batch being written) ≤
//     OutboundBytes, a credential's connections' ≤ OutboundBytesPerCredential (so one token's connections that
//     read nothing cannot take everyone's budget), a run's worker connections' ≤ OutboundBytesPerRun (so neither
//     can the many tokens one run may issue) and everyone's ≤ GlobalOutboundBytes, except that a connection
//     holding nothing takes one frame, and that the answer its reader rendered, having read the request only once
//     the connection was within those bounds, goes in beyond them (counted: no answer waits for room outside the
//     budgets, so a credential's connections that read nothing hold at most OutboundBytesPerCredential +
//     MaxConnsPerCredential × 2 × MaxFrame, + the frames per connection named next) — so outbound memory ≤ GlobalOutboundBytes +
//     (MaxConns+AdminConns) × 2 × MaxFrame (+ one resync, one final frame and the answers of its waits, a task's
//     status each, per connection); queue ≤ OutboundQueueCap frames (+ those answers); connections ≤
//     MaxConns+AdminConns; the bytes of lines longer than a reader's 4 KiB read-ahead, from the moment they outgrow
//     it until they end, ≤ InboundBytesPerCredential for a credential's connections, ≤ InboundBytesPerRun for a
//     run's worker connections (so neither one token's lines left unfinished nor those of the many tokens one run
//     may issue can take everyone's budget) and ≤ GlobalInboundBytes, every connection's together (inbound.go: a
//     reader without room in one of them reads no more and waits, holding none of the others', writeTimeout at
//     most, then its connection closes as for a line over the cap, at once when its client closes); waits
//     and subscriptions bounded per connection and credential; params bounded by ParseCommand and the handlers, a
//     list decoded no further than one element past its bound by ParseCommand, and refused past it before it is
//     decoded by the handlers (params.strs), so a frame of tens of thousands of short strings costs no slice of them;
//     a params object read where it is, never decoded into a map of its keys (params.go, and splitParams for a
//     command, which keeps the keys the commands read and one other; a frame's own members and a hello's credential
//     likewise, wire.EachMember), so neither do tens of thousands of made-up keys, before the role is checked or
//     after; pacing buckets only for keys charged recently (a full bucket is
//     deleted, pacer.go), so processes that each send one refused hello leave none behind once their buckets refill;
//     a credential's or a run's outbound and inbound budgets only while it has connections.
//   - Every list a query answers is reachable whatever its size: query.tasks, query.delegations, query.ledger,
//     query.mailbox, msg.inbox, query.runs, query.jobs, query.job's calls and import.checkpoints page by cursor, and
//     a page whose items would not fit in a frame is cut short (hasMore, or a nextCursor) rather than refused
//     (fitPage in paging.go); events.since ends a page before an event that does not fit in the rest of it and sends
//     an event without its data (omitted) only when it cannot fit a page of its own, bare (fitEvent) when even that
//     would not fit; a push of the smallest frame holds every event bare, so no event ends a subscription. A run, a
//     task, a delegation or a message that cannot fit a page of its own is sent without its long texts
//     (texts_omitted.go), then a run without its names and its park's task id, a task without its dependsOn
//     (query.tasks {taskId} pages it), then its names and runId (task_fit.go), a delegation without its role, runId
//     and messageId (delegation_fit.go), a message without its run's, its mailbox's and its reply's ids, then its
//     sender's (message_fit.go), an account without its history (ledger.go: one that could not fit, whatever its
//     entries hold, is read without it, not copied), a job without its root, and query.job's job, when its own
//     fields leave no room for one of its calls, without its root, then without its grant too (jobs.go).
//     Only a single item larger than a frame even so, with what its answer holds around it, is oversize-frame; so is
//     a single object (query.run, proxy.result) larger than a frame.
//   - A command is never committed with an answer its client cannot receive: the engine is told the room the
//     request's id leaves a result in a frame (wire.ResultRoom, less a minted secret's field) and refuses a larger
//     result before anything is recorded, answered oversize-frame; the same commandId may come again with a
//     shorter id.
//   - A request whose record its reader could not read whole (a worker's msg.send or escalate in msg.inbox,
//     proxy.request's proxy.requested in events.since, proxy.complete's result in proxy.result) is refused
//     oversize-frame, nothing recorded: by the broker without a commandId, else by the engine
//     (commands.Request.Refused), only when the id has no outcome. A delegate.settle whose text would not fit its
//     reader is not refused but cut (fitResult), and is fingerprinted by the text as sent (SentText), so a retry
//     through a frame that cuts it otherwise is answered its outcome; docs/protocol.md says which outcomes of a
//     build before that answer only a retry cut as they were.
//   - A hello cannot probe which runs exist: an unknown run, an unknown task and a wrong orchestrator token all
//     answer auth; stale-token (pi-crew's answer, which its client acts on) needs an existing run and task named.
//     query.slots shows a worker or an orchestrator only its own run's holders; the admin sees every holder.
//   - Errors map to wire codes in one table (errors.go); anything unmapped is "internal", logged in full.
//   - The socket is reachable only by the daemon's uid (socket 0600 in a 0700 directory), or also by SocketGroup
//     (0660 / 0750 with that group); an existing directory others may reach is refused, never chmod-ed. Every
//     accepted connection's peer is checked by the kernel's credentials (SO_PEERCRED), so a peer that file
//     modes do not stop (root, a leaked descriptor) is refused too. See docs/security.md.
//
// # Not guaranteed
//
//   - Mailbox pushes can be dropped (full queue, frame over the cap); msg.inbox is authoritative.
//   - A client that pipelines requests without reading answers is slowed, then disconnected after 10 s.
//   - Connections of the daemon's own uid that never say hello can take the admin's AdminConns places: before its
//     hello the daemon cannot tell such a connection from the admin's (a peer of another uid is refused at accept
//     once MaxConns are open, so only the processes of the uid that can read the admin token reach those places).
//     So they are safe from every authenticated connection and from other users, not from these. Connections without
//     a hello are bounded per connecting process (MaxPendingPerPeer, by the pid SO_PEERCRED reports) and in time
//     (HelloTimeout to send the hello, and at most the longer of HelloTimeout and MinHelloPaceWait, 5 s, while the
//     hello waits for its process's pace): one process cannot fill the daemon with them, but many processes of the
//     socket's users together can fill its MaxConns places, and the daemon's uid's its AdminConns too, for that long,
//     during which new connections, orchestrators' included, are refused (too-many-connections, so they can retry).
//     Per-pid is the finest identity a connection has before its hello; a worker that forks to get around it pays a
//     process per 128 connections.
//   - A wait's answer that was already queued when its credential ended may precede the final frame.
//   - CPU time itself: pacing counts requests, their bytes and events, not nanoseconds, so requests of unequal
//     cost (a commit, a large query page) weigh alike, and what the buckets allow still runs: RatePerRun units per
//     second of a run's workers together and RatePerCredential of its orchestrator; many runs together get more
//     than one. The engine's queue is shared: a run's commits within its rate go ahead of another run's in arrival
//     order (docs/benchmarks.md, "Hostile mix").
//   - Fairness within a run: its workers share its bucket and its outbound budget, first come, first served, so
//     a few of its credentials that flood or read nothing (four at the defaults) can slow or resync its others,
//     never another run's connections nor its orchestrator.
//   - pi-crew's stale-token after a restart: crewlog persists credential digests, so a valid token keeps working.
package broker
