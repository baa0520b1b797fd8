// Package turns bounds, per key, how many callers may be inside a section at once: the per-credential turns of
// the socket broker's page reads and of the HTTP API's requests and rebuilds.
//
// # Guaranteed
//
//   - A key never has more than the limit's turns held at once; other keys are not held up by it.
//   - Take waits in arrival order (first in, first served) and gives up when its context ends, holding nothing.
//   - With NewWithWaiters, a key never has more than maxWaiting takers waiting: a Take that would wait behind them
//     fails at once with ErrTooManyWaiting, holding nothing. A waiter's place frees when it is handed a turn
//     (even one it then gives back, its context having ended) or gives up.
//   - The function a taken turn returns gives the turn back once: calling it again does nothing.
//   - A key with no turn held and no taker waiting has no entry: memory follows the keys in use, not every key
//     that ever took a turn (a daemon issues and revokes credentials for its whole life).
//
// # Not guaranteed
//
//   - With New, the number of waiters per key is the caller's to bound (the broker's connections per credential;
//     the rebuilds' requests in progress): a waiter costs a small channel, and whatever the caller holds while it
//     waits (an HTTP connection's place), until it is served or gives up.
package turns
