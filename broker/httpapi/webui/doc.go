// Package webui is the crew dashboard: the page crewd serves next to its HTTP API (docs/dashboard-api.md). Its
// files live in static/ and are embedded with go:embed; FS hands them to the server (httpapi.Options.UI).
//
// # Guarantees
//
//   - Nothing to build: the page is plain JavaScript modules and CSS that browsers load as they are, so
//     `go run ./cmd/crewd` serves it on a machine without Node, and what is reviewed is what runs.
//   - Offline: every file the page loads is in static/ and referenced by a root-relative path; nothing comes
//     from another origin (no CDN, no web font). A test checks both.
//   - Read-only: the page only sends GET requests to /api/v1/ and opens /api/v1/stream; it changes nothing.
//   - Untrusted text stays text: goals, titles, message bodies and reasons come from clients of the daemon, so
//     they reach the page as text nodes and attribute values (dom.js), never through innerHTML; the page needs
//     no inline script or style, so a strict Content-Security-Policy can forbid both.
//   - Signed in on its own origin only: the login's redirect hands the page the session's proof in its fragment;
//     the page keeps it in its origin's localStorage, which pages of other ports of the host cannot read (once crewd
//     takes it: a fragment another page chose cannot replace it), and sends it with every read and on the stream
//     (api.js), since crewd refuses the session cookie alone, which the browser sends to every port. Signed out, it
//     says where a login link is opened: at the base crewd names on its answers (X-Crewlog-Login: an https public
//     URL's too), or, crewd naming none, at the page's own address (format.js, loginLinkHint).
//   - Live without reload: one EventSource on /api/v1/stream feeds every view; a resync (the page read too
//     slowly) makes the views re-read what they show and reopens the stream live.
//   - Bounded however long it stays open: a run view holds at most 50,000 of the run's events (api.js,
//     maxRunEvents); its first read stops there, and the stream's events then push out the oldest, which time
//     travel no longer reaches.
//   - A refusal for now is not an error: a read answered 429 too-many-reads (the credential's other clients fill
//     its turns) is read again up to 4 times, after a jittered wait that doubles from 125–250 ms to 1–2 s and is
//     never shorter than the answer's Retry-After (one longer than 30 s is not waited for); meanwhile the header
//     says so and the view keeps waiting. A past state (state?at, explain) answered 429 too-many-rebuilds is
//     asked again at most twice, after 1–2 s then 2–4 s and never sooner than the Retry-After, crewd's reckoning
//     of the rebuilds ahead (one longer than 10 s is not waited for). Any other failure fails the read at once.
//   - Time travel stays responsive: the bar asks for one past state at a time (crewd rebuilds each), so a position
//     chosen while one is at crewd waits for its answer, passing over those chosen before it; but one chosen while
//     a refused position waits to be asked again aborts that wait and is asked at once, and going live drops both
//     (retry.js, latestOnly).
//
// # Layout of static/
//
//	index.html, app.css, favicon.svg   the shell: header, theme (light and dark), main
//	js/main.js                          routing (#/runs, #/health, #/run/ID/TAB), stream, keyboard
//	js/route.js                         the view the fragment names; one not percent-encoding: the runs (pure)
//	js/api.js                           the API as functions; paging; the stream
//	js/retry.js                         when a read refused for now is read again; time travel's latest read (pure)
//	js/model.js, js/format.js           pure shaping and wording (timeline, tree, health, policy inputs)
//	js/live.js                          keeping a view current: refreshes coalesced, tickers
//	js/dom.js                           DOM nodes built from parts, never from markup (text stays text)
//	js/widgets.js                       what every view draws with: pills, budget bars, tables, the why? dialog
//	js/views/*.js                       run list and slot pool, run view with its tabs, health
//
// The pure modules, the stream (against a fake EventSource) and the reads again (against a fake fetch) are tested
// with node --test (jstest/, run by TestJavaScriptUnits when node is on PATH); the whole page is tested in headless
// Chromium against a real crewd by integration's TestDashboard.
package webui
