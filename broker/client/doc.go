// Package client is the Go client of the crewlog broker: crewctl, the integration tests and Go runtimes use it to
// talk to crewd over its unix socket with the NDJSON protocol of broker/wire.
//
// A Client is one connection: Dial connects and sends the hello (one deadline, 5 s by default, covers both), then
// one reader goroutine and one writer goroutine serve it. Calls from any number of goroutines are multiplexed on
// the connection and matched to their answers by request id. A Subscription is a connection of its own, so a
// consumer that reads events slowly never delays the answers to calls, and the broker's back-pressure (a resync
// frame) applies to that subscription alone.
//
//	caller goroutines ──Call──▶ writer queue ─▶ writer ─▶ socket ─▶ broker
//	        ▲                                                  │
//	        └── pending[id] ◀── reader ◀── socket ◀────────────┘
//	                              ├─ mailbox.message ─▶ Options.OnMailbox
//	                              └─ team.event, resync ─▶ Subscription buffer (its own connection only)
//
// # Guarantees
//
//   - Every frame read is at most the frame cap (Options.MaxFrame, wire.DefaultMaxFrame by default); a longer or
//     malformed frame from the broker closes the connection. Memory is bounded: one frame in the reader, a fixed
//     writer queue, and a fixed number of buffered frames per Subscription.
//   - Call returns a *wire.Error not matching ErrClosed exactly when the broker answered the request with an error
//     frame (errors.As works through the wrapping). Any other failure is local: a request that could not be
//     encoded or has an invalid method name was not sent; an error matching ErrClosed means the connection is gone
//     and the request may or may not have been decided — when the broker ended the connection with an error frame
//     that answers no request (revoked, stale-token, idle-timeout, too-many-connections), that *wire.Error is
//     wrapped in it, so wire.CodeOf tells why, also when a request written after the broker's close failed before
//     the frame was read (the reader reads on to the broker's EOF); a context error means the caller stopped
//     waiting and, likewise, the outcome is unknown. Commands carrying a commandId can be retried with the same id
//     to learn what happened.
//   - Subscription.Next yields team events in strictly increasing seq order and never the same seq twice. When
//     the broker reports an overflow with a resync frame, the subscription re-subscribes on its own from the
//     first seq it missed and removes the overlap, so the consumer sees no gap and no repeat.
//
// # Not guaranteed
//
//   - Reconnection: a lost connection fails every pending and later Call with ErrClosed. Dial again; a lost
//     Subscription is resumed with Subscribe(ctx, s.Last(), types, opts...).
//   - Mailbox pushes are a latency hint, as in pi-crew: the inbox (msg.inbox) is authoritative. OnMailbox runs on
//     the reader goroutine, so it must return quickly and must not wait for a Call on the same Client.
//   - Pushes of team.event on a Client that is not a Subscription's are dropped: use Subscribe, not a raw
//     Call("events.subscribe"), to receive events.
package client
