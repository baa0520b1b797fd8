// Package wire is the byte format of the crewlog broker protocol: frames, their envelopes and the error-code
// registry. The broker server and the Go client both build on it. It has no sockets, goroutines or state beyond a
// Reader's buffer; it imports only the standard library and two leaves of events: jsonstring, its strings' encoder,
// and jsonscan, its scanner of valid JSON.
//
// The protocol is pi-crew's broker protocol version 1 (D§7), kept wire-compatible so a pi-crew runtime can talk to
// crewlog, plus the resync frame of SPEC §5.
//
// # Framing
//
// A connection carries NDJSON in both directions: UTF-8 JSON objects, one per line, each followed by '\n'.
//
//	+---------------------- frame: at most maxFrame bytes -----------------------+
//	| {"id":"7","method":"ping","params":null}                                | \n |
//	+-------------------------------------------------------------------------+----+
//	  one JSON object, compact, no raw newline (strings escape it)             terminator
//
// maxFrame is 262144 bytes by default (pi-crew's MAX_BROKER_FRAME_BYTES), configurable 1024..1048576, and counts
// the newline. Reading:
//
//   - a line longer than the cap allows is refused as soon as its length passes the cap, before the rest of it is
//     read: ErrFrameTooLarge, and the broker closes the connection without a frame;
//   - a complete line that is not one JSON object in valid UTF-8: ErrMalformed, close without a frame;
//   - a '\r' before the '\n' is dropped; blank lines (empty or only spaces, tabs, '\r') are skipped, and count
//     toward the cap of the frame after them (so a peer cannot keep the reader skipping them for ever);
//   - end of stream inside a line: ErrTruncated, the source's error with it when the stream ended in one (a reset);
//     at a line boundary (or after only blanks): io.EOF.
//
// Writing refuses a value that does not encode to one object or whose frame would exceed the cap.
//
// # Frames
//
//	request   client → broker   {"id":"<1..256 chars>","method":"<^[a-zA-Z][a-zA-Z0-9._-]{0,63}$>","params":<any JSON>}
//	result    broker → client   {"id":"<request id>","result":<any JSON>}
//	error     broker → client   {"id":"<request id>","error":{"code":"<Code>","message":"<text>"}}
//	push      broker → client   {"event":"mailbox.message"|"team.event","data":<any JSON>,"seq":<uint>}
//	resync    broker → client   {"event":"resync","data":{"fromSeq":<uint>}}          (crewlog only, no seq)
//
// The params key must be present (null is fine); a request that fails these rules is answered like a malformed
// line, by closing without a frame (code protocol). "chars" are UTF-16 code units, as JavaScript counts them
// (UTF16Len). A client matches a response to its request by id, and tells a push from a response by its "event"
// key, which no response has.
//
// # Handshake
//
//	client                                                       broker
//	  | connect                                                    |  starts a 1 s timer (HelloTimeout)
//	  | {"id":"1","method":"hello","params":{"protocol":1,         |
//	  |   "runId":"r","taskId":"t","token":"<secret>"}}        --> |
//	  |                                                        <-- | {"id":"1","result":{"protocol":1,
//	  |                                                            |   "session":"s","run":"r","ok":true}}
//	  | … requests, responses, pushes …                            |
//
// No hello within HelloTimeout: close. First request not hello: error protocol "hello required", close. A second
// hello: error protocol "hello already completed", close. Bad hello shape, protocol other than 1 or an unknown
// token: error auth "hello rejected", close (never saying which field); but a wrong token naming a run and a task
// of it that exist: error stale-token, close (pi-crew's answer, on which its client re-issues), as for a worker's
// own token once its run or task is terminal. A revoked credential: error revoked "token revoked", close — checked
// again before every later frame. The ack never echoes the token. A connection
// the broker ends between requests (the credential ended, idle, over a limit) gets one error frame whose id is
// "" — it answers no request — and is closed; codes are pi-crew's plus crewlog's too-many-connections,
// idle-timeout, too-many-waits and too-many-subscriptions.
//
// # Guarantees
//
//   - A Reader never holds more than maxFrame-1 bytes of a line, plus a read-ahead buffer of at most 4 KiB, however
//     long the peer's line is, and it stops reading from its source at its first error. What it holds beyond the
//     read-ahead it takes from its SpillBudget, if it has one, and gives back once, when the line ends, however it
//     ends.
//   - Every frame ReadFrame returns is one JSON object in valid UTF-8 without '\n', accepted or refused as json.Valid
//     would (by a validator of its own, held to json.Valid by a fuzz test, nesting limit included); DecodeRequest
//     and DecodeHello apply pi-crew's rules (exact key names, lengths in UTF-16 units, the last of duplicate keys
//     wins) and never panic on any input. ReadRequest and ReadResponse (a client's) read a frame and decode it as
//     DecodeRequest and Response.UnmarshalJSON do, in one scan, without checking again what ReadFrame checked; fuzz
//     tests hold each to the decoding it replaces. ReadRequestInPlace (the broker's) is ReadRequest with the params
//     left in the Reader's buffer, valid until its next read.
//   - EachMember splits a valid JSON object into its members, each key decoded as encoding/json decodes it (a fuzz
//     test holds it to decoding the object into a map), allocating nothing per member: its keys alias the object or
//     are decoded into one buffer it reuses. The decoders find a frame's own members (id, method, params, …) and a
//     hello's with it too, so a frame's worth of keys a peer made up costs no string a key there either.
//   - AppendFrame encodes requests, success responses and pushes without reflection, byte for byte as
//     encoding/json does (fuzz tests compare them), and anything else through encoding/json. A CompactResponse's
//     result is copied as it is: that it is compact, valid JSON is its producer's word (the broker's events.since).
//     AppendCompactResponse is AppendFrame of a CompactResponse, the same bytes, for a caller that has its parts;
//     AppendCompactEvent is AppendFrame of an Event whose data is compact, on the same word (the broker's mailbox
//     pushes), and AppendJSONString appends a string as json.Marshal encodes it.
//   - AppendFrame's output is always a single line within the cap, or nothing.
//   - Codes are pi-crew's spellings plus crewlog's own (marked in code.go); Code.Closes tells which ones end the
//     connection.
//
// # Not guaranteed
//
//   - Byte-identical output to JSON.stringify: encoding/json escapes U+2028 and U+2029 and orders map keys. Key
//     order of this package's own frame types does match pi-crew's.
//   - Redaction: messages in *Error and payloads in Event are sent as given (pi-crew redacts; the broker must).
//   - Flow control, timeouts and close reasons: the broker's. Nothing here blocks except the Reader's source.
//   - pi-crew rejects a line of only spaces as malformed; this package skips it, and also refuses invalid UTF-8
//     that Node would have replaced with U+FFFD. No pi-crew peer sends either.
//   - pi-crew echoes a request id holding a lone UTF-16 surrogate escape (\ud800); DecodeRequest refuses it
//     (HoldsLoneSurrogate), since Go decodes it to U+FFFD and an answer would name an id the client never sent.
package wire
