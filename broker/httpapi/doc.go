// Package httpapi is crewlog's read-only HTTP front end: the dashboard's JSON API under /api/v1/ (the socket's
// projections and queries, paged by cursor), a live Server-Sent Events stream, Prometheus metrics, health probes,
// and the page's static files. docs/dashboard-api.md is the contract; tests pin every route's shape, paging and
// refusals.
//
// # Reading
//
// Every list reads the same projection queries the broker's query.* methods call (projections.State.Runs,
// TasksPage, DelegationsPage, LedgerPage, AccountHistory, Mailbox, Asks, Credentials, Slots) through
// commands.Engine.Read, copying only the page inside the read; state?at and explain rebuild with audit.Replay, the
// fold crewctl replay runs; events and the stream read the log (eventlog.Log.Read / ReadStream) up to the engine's
// published head, rendered as the socket's team.event (broker.AdminEventJSON).
//
// # Guarantees
//
//   - Read-only: no route changes state (POST /api/v1/login mints a login link, held in memory only).
//   - Authentication on every data route: the admin token or a read-only token (TokenChecker: digests only) as a
//     Bearer, or a session cookie (HttpOnly, SameSite=Strict) got by spending a one-time login code. Tokens,
//     codes and session ids are held as sha-256 digests and compared in constant time; none reaches a log line.
//   - Loopback only unless Options.AllowRemote: Listen refuses another address, and the handler refuses a Host
//     header that does not name loopback (DNS rebinding).
//   - Every client-controlled size is bounded: limit 1..1000, cursors ≤ 64 bytes, ids ≤ 256, type filters ≤ 64,
//     a search scans ≤ 5,000 runs per page, an events page looks at ≤ 20,000 events, streams ≤ MaxStreams and
//     ≤ MaxStreamsPerPrincipal, open connections ≤ MaxConns (Accept waits), sessions ≤ MaxSessions, login codes ≤ 64, per-run metric series ≤ 1,000; a
//     handler panic answers 500 and is logged, the daemon goes on.
//   - Paging never skips or repeats an item; a cursor the route did not hand out is 400 bad-cursor.
//   - The writer never waits for HTTP: reads hold the engine's read lock only while copying a page, and streams
//     read the log, never the engine's queue. One hub goroutine reads and renders each published event once
//     for all streams into a ring of the newest frames (2 × StreamBytes); a stream whose unsent bytes exceed
//     StreamBytes, or whose next event left the ring, gets ONE resync event (fromPosition = the first position
//     not sent) and ends — the socket's rule. Memory: the ring plus ≤ 256 KiB in flight per stream.
//   - A stream delivers events in position order from its start (Last-Event-ID / after, else the head), never
//     repeating or skipping one; a start older than the ring replays from the log first.
//   - state?at and explain rebuild one at a time, from the nearest of the last 4 rebuilt states (or position 1);
//     a credential or session has at most 4 of them in progress or waiting (429 too-many-rebuilds beyond).
//
// # Not guaranteed
//
//   - Sessions and login codes live in memory: a restart logs every page out (crewd prints a new link).
//   - state?at=TIME finds the position by binary search over event times, which assumes times follow positions
//     (one engine clock); after a clock step backwards it may differ from crewctl replay --at.
//   - A rebuild reads the log from the nearest kept state: the first state?at or explain on a large store costs
//     a replay (about 100k events a second here).
//   - TLS: serve it behind a proxy that terminates TLS when --http-allow-remote.
package httpapi
