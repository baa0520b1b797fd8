// Package httpapi is crewlog's read-only HTTP front end: the dashboard's JSON API under /api/v1/ (the socket's
// projections and queries, paged by cursor), a live Server-Sent Events stream, Prometheus metrics, health probes,
// and the page's static files. docs/dashboard-api.md is the contract; tests pin every route's shape, paging and
// refusals.
//
// # Reading
//
// Every list reads the same projection queries the broker's query.* methods call (projections.State.Runs, TasksPage,
// DelegationsPage, LedgerPageWithin, AccountHistory, Mailbox, AsksPage, CredentialsPage, Slots) through
// commands.Engine.Read, which page the run's lists in place and copy only the page inside the read (the list of
// accounts, which counts each history, copies none of them); state?at folds the one run up to the position
// (projections.RunAt: the run's stream and the engine stream, the fold a cold run is read back with) and explain
// re-runs one decision on its run's state (audit.ExplainAt), both O(the run), not O(the log); events and the stream
// read the log (eventlog.Log.Read / ReadStream) up to the engine's published head, rendered as the socket's team.event
// (broker.AdminEventJSON).
//
// # Guarantees
//
//   - Read-only: no route changes state (POST /api/v1/login mints a login link, held in memory only).
//   - Authentication on every data route: the admin token or a read-only token (TokenChecker: digests only) as a
//     Bearer, or a session cookie (HttpOnly, SameSite=Strict; named by the listener's port, so that two servers of
//     one host keep their sessions apart; Secure with Options.SecureCookie: cookie.go) got by spending a one-time
//     login code, with the session's proof (an HMAC of it, handed to the page in the login's fragment: auth.go),
//     since the browser sends the cookie to every port of the host, a worker's server on another one too; the session
//     is the cookie the proof was made for, of the first 32 sent, since such a server may also set ones the browser
//     sends first. A session belongs to the credential that minted its code: it lasts only while that credential is
//     valid and counts against its limits; an open stream re-checks its credential before every write and every
//     second while it has nothing to send (credentialRecheck), and ends once it is revoked or the session expired,
//     and a request that waited for its read turn or for the rebuild slot re-checks it when the turn comes (401,
//     nothing read nor folded, the turn passed on: readturns.go, stateCache.turn), a rebuild in progress every
//     second (401, stopped as when its client goes: watchCredential); a request another origin sent (Sec-Fetch-Site
//     same-site or cross-site) may not use the cookie, nor spend a login code (which would log the browser into the
//     session of the credential that minted it). Tokens, codes and session ids are held as sha-256 digests and
//     compared in constant time; none reaches a log line.
//   - Loopback only unless Options.AllowRemote: Listen refuses another address, and the handler refuses a Host
//     header that names neither loopback nor the host of Options.PublicURL (DNS rebinding: hostAllowed).
//   - Every client-controlled size is bounded: a request's line and headers ≤ 16 KiB (431 beyond, from net/http)
//     and sent within 10 s (ReadHeaderTimeout), a kept-alive connection idle ≤ 2 min (IdleTimeout), limit 1..1000,
//     cursors ≤ 64 bytes, ids ≤ 256, type filters ≤ 64,
//     a search scans ≤ 5,000 runs per page, an events page looks at ≤ 20,000 events, a page of runs, events or a
//     run's list holds ≤ 4 MiB of items (maxPageBytes; at least one item; each item is encoded once, to
//     measure the page, and the answer is written from those bytes: answer.go), streams ≤ MaxStreams and
//     ≤ MaxStreamsPerPrincipal, open connections ≤ MaxConns (making room, below), sessions ≤ MaxSessions (16 per
//     credential), login codes ≤ 64 (8 per credential; a revoked token's codes go when a code is next minted, its
//     sessions when a code is next spent, before any valid credential's), requests in progress ≤ 4 per credential
//     and ≤ 8 more waiting their turn (beyond, 429 too-many-reads with Retry-After: 1 at once: readturns.go),
//     a read-only token's reads paced in its turn at the socket's rate per credential, each charged one unit and
//     the events of the cold runs it read back (Options.Pacer: pacing.go), one per 4 KiB of the runs' fields a
//     search went through (runsearch.go) and of the cold runs' summaries a page of runs read from the index on disk
//     (runs.go), those an events page read,
//     those explain read to find its decision, and those its rebuild read, up to where it stopped when its client
//     or its credential went (rebuildpacing.go),
//     per-run metric series ≤ 1,000; a handler panic answers 500 and is logged, the daemon goes on.
//   - A Pebble fatal error (eventlog.FatalError) met by a handler or the stream hub is never recovered: the process
//     exits (status 2, the panic printed) for its supervisor to restart it, the handler answering nothing.
//   - Paging never skips or repeats an item; a cursor the route did not hand out is 400 bad-cursor.
//   - The writer never waits for HTTP: reads hold the engine's read lock only while copying a page, and streams
//     read the log, never the engine's queue. One hub goroutine reads and renders each published event once
//     for all streams into a ring of the newest frames (2 × StreamBytes); a stream whose unsent bytes exceed
//     StreamBytes, or whose next event left the ring, gets ONE resync event (fromPosition = the first position
//     not sent) and ends — the socket's rule. Memory: the ring plus ≤ 256 KiB in flight per stream.
//   - A stream delivers events in position order from its start (Last-Event-ID / after, else the head), never
//     repeating or skipping one; a start older than the ring replays from the log first, in writes of the same
//     ≤ 256 KiB of frames (at least one frame) as the ring's. It reads ≤ 256 events at a time, each time during
//     its credential's one catch-up turn, which its credential's replaying streams take in arrival order and give
//     back before they write: however many streams a credential opens, with whatever filter (one that keeps
//     nothing writes nothing, so no client's pace slows its replay), together they read the log no faster than
//     one, and no other credential's stream waits for them; a stream that waited re-checks its credential when
//     its turn comes (catchupturns.go). A read-only token's streams also read at its pace: each opens as a read
//     is served, once the token's bucket holds a unit, and is charged one unit; each read, of the log or of the
//     ring, waits for the token's bucket, sending the stream's keep-alive meanwhile, and is charged the events it
//     read from the log, or those of its run it looked at of the hub's one read of them, sent or left out by its
//     type filter (stream.go, pacing.go).
//   - No stream waits on a hub that stopped: when the hub stops on an error (a log read error or a panic, logged),
//     every open stream, live or replaying, one waiting out its token's debt too, gets its resync (the reason says
//     so) and ends, and a new stream, one waiting out its token's debt to open too, is refused 503 unavailable at
//     once until crewd restarts, never opened to keep-alives only (hub.fail, handleStream).
//   - state?at and explain rebuild one at a time (the principals waiting served in turn, each one's rebuilds in
//     arrival order: turns.Shared), from the nearest of the last 4 rebuilt run states before their
//     position (or the run's first event); a credential or session has at most 4 of them in progress or waiting
//     (429 too-many-rebuilds beyond, at once, with a Retry-After of 1..60 s: the rebuilds in progress or waiting,
//     every principal's, times the recent rebuilds' mean time, timed by Options.Now: state.go). Each shows the run
//     exactly as the full rebuild (crewctl replay --to) does. A rebuild ends when its client goes away: its fold
//     runs under the request's context and stops within 256 events of it ending (projections.RunAt), gives the
//     slot to the next at once, keeps no state and answers nothing (nor logs: a client going is no failure), so
//     a client that asks for a large run's past and leaves holds the slot no longer than it stays. It ends as
//     well when the server's Close begins, answered 503 unavailable as a paced wait is: waiting for the slot at
//     once, folding within 256 events, reading a time's events (audit.PositionAt) within 1,024, so Close does not
//     wait its grace (2 s) for it (untilClose).
//   - A daemon-wide figure that a run's own events do not give is never guessed: a past state's slots.held is
//     null (only the head's state knows it), and explain re-runs a delegation request with the slots held in all
//     and the other runs waiting that the decision recorded (poolInputs "recorded").
//   - state?at=TIME resolves the time by audit.PositionAt, and crewctl replay --at stops by the same rule: at the
//     same position, the one before the first event later than the time in log order. Times do not follow
//     positions (an import records its source's), so that reads the events up to it, every run's, O(the
//     position): it takes a rebuild's turn, the one the run's fold then holds (one rebuild, waited for once), and
//     its read ends when its client goes away, as a fold does.
//
// # Connections
//
// Listen's listener holds at most MaxConns connections open (limitlistener.go). Waiting for one to close, as it
// once did, let any local process hold every place for nothing: MaxConns connections, each sent one
// unauthenticated request (answered 401) and then left idle in keep-alive, hold their places for IdleTimeout
// (2 min), or MaxConns that send nothing hold theirs for ReadHeaderTimeout (10 s), reopened at once — and the
// dashboard could not connect at all. So when a connection arrives and every place is held, the listener makes
// room for it:
//
//   - first it closes the connection idle the longest (http.StateIdle: between two requests). Closing an idle
//     keep-alive connection is allowed by HTTP/1.1 at any time and is what IdleTimeout does anyway, sooner; clients
//     reopen and resend an idempotent request (every route but POST /api/v1/login is a GET);
//   - else the oldest, by more than ConnGrace (default 1 s), of the connections that have sent no complete request
//     (http.StateNew), since the server took them, and of those whose request in progress keeps no place (below;
//     http.StateActive: a request without a valid credential, or one answered at once: a page's file, a 401, 405,
//     404 or 429), since the request came or let its place go: closing one still sending its header is what
//     ReadHeaderTimeout would do, sooner, and one whose quick answer its client has not taken within the grace is
//     one that pipelines requests and reads no answer, which would otherwise hold its place until the write
//     deadline (10 s, below), every place with enough connections, the next moment again. The grace keeps a
//     legitimate client that has just connected from losing its place to the next one;
//   - never a connection whose request in progress keeps its place: it holds what its credential has a bounded
//     number of (keepPlace): a stream, bounded by MaxStreams and MaxStreamsPerPrincipal below MaxConns, or a
//     read in progress or waiting its turn, ≤ 4 + 8 per credential; nor a hijacked one. If every place holds such
//     a one, Accept waits for a place, as before.
//
// The reads' bound is what keeps one credential from holding every place: without it, a token's clients could
// open MaxConns connections, each with a read waiting its turn behind the token's 4 in progress, all active, and
// every other credential, the operator's page included, would wait to be accepted. With it, the token's reads
// hold at most 12 places; its next is answered 429 at once and keeps no place: its connection is the first to make
// room once idle, or once past the grace if its client does not read the 429. Its streams hold at most
// MaxStreamsPerPrincipal more (or MaxStreams if fewer), so New refuses a MaxConns that does not exceed the sum (76
// by default, of 1,024): a place is always left for another credential.
//
// An unauthenticated client holds no place beyond the grace: its answer is immediate, a request with a body is
// answered and its connection closed without reading the body (no route reads one; net/http would otherwise wait
// for it with no deadline), and a connection whose answer is not taken may be closed like a new one. (A request
// with a body, and one held long, a stream, a read waiting its turn or its credential's pacing, a rebuild, still
// ends when its client goes, requests pipelined behind it or not: while it is in its handler the server reads and
// drops what follows on its connection, 64 KiB at most, to see the client go, and closes the connection after its
// answer: clientwatch.go, unreadbody.go.) So
// a hostile client's connections are idle, new or active keeping no place, and each new client takes the place of
// one of them; refilling the places costs it a connection and a request per place.
//
// A request in progress holds its read turn and its place only while its client reads the answer. The server has
// no WriteTimeout (it would end every stream), so every answer's writes carry deadlines of their own
// (deadlines.go): each 256 KiB of an answer, its header with the first, and of each write of a stream must be
// taken by the client within 10 s (writeTimeout), the time starting when that piece is written (not while the request
// waits for its turn or a rebuild). A client that stops reading, an unauthenticated one's 401 or a page's file
// included, loses its answer within 10 s of its last deadline: the write fails, the handler returns, a read's turn
// goes to the next, and net/http closes the connection, freeing its place — whether or not its credential is
// still valid. One that reads slowly is served: a page of 4 MiB has 16 such deadlines, one after the other.
//
// The states come from http.Server.ConnState, and what a request holds from the handler, which finds its
// connection through http.Server.ConnContext. Each change moves the connection between three intrusive lists (idle,
// ordered by when it went idle; new, ordered by when the server took it; active keeping no place, ordered by when
// its request came or let its place go) in O(1) under one mutex, and choosing whom to close reads the head of each
// list, also O(1): there is no scan. The listener accepts the next connection before it makes room, so it closes
// one only for a client that is there; while it waits it holds that one connection: at most MaxConns + 1 are open.
// crewlog_http_connections_evicted_total{state} counts the connections closed to make room.
//
// # Not guaranteed
//
//   - Sessions and login codes live in memory: a restart logs every page out (crewd prints a new link).
//   - A rebuild costs O(the run): a run of 5,000 delegations (33k events) takes about 200 ms from its first
//     event, 5,000 events about 20 ms; later positions near a kept state cost the events between them. The
//     Retry-After of too-many-rebuilds is an estimate at the recent pace, not a promise: after slower rebuilds
//     than the recent ones, the principal's next try can be refused again.
//   - Explain does not check the recorded pool inputs against the other runs' events (a full crewctl replay
//     --explain, which folds every run, does).
//   - A request that arrives on an idle connection just as it is closed to make room is lost with it (the race
//     every keep-alive close has); the client sees the connection closed and retries on a new one.
//   - Places per credential, not in all: a credential holds at most 12 places with reads and
//     MaxStreamsPerPrincipal with streams, so enough credentials together (read-only tokens are the admin's to
//     issue) can still hold every place, and new connections then wait to be accepted.
//   - Fairness between one credential's clients: its 8 waiting places go to whoever asks first; one client
//     keeping them full gets the credential's other clients 429s.
//   - A total time for an answer: a client that takes each 256 KiB just within its 10 s holds its turn and place
//     for as long as the answer lasts, up to 160 s for a page of 4 MiB (a state?at answer's lists hold up to
//     4 MiB each).
//   - TLS: serve it behind a proxy that terminates TLS when --http-allow-remote, with Options.SecureCookie
//     (--http-secure-cookie). A server on another port of the host can replace the page's cookie of Path=/ (the
//     name is no secret), which signs the page out until its next login; over https with SecureCookie the name's
//     __Host- prefix keeps a plain-http origin from doing so. The login links name Options.PublicURL, the proxy's
//     address, which the operator gives: never a request's Host or X-Forwarded-* (publicurl.go); no path prefix, so
//     the proxy serves the page at / of an origin of its own. The API's answers name the links' base
//     (X-Crewlog-Login), which the page signed out shows.
package httpapi
