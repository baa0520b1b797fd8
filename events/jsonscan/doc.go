// Package jsonscan walks JSON without decoding it: where whitespace ends, where a value ends, and how much of an
// array a bounded parse needs; and decodes a string into a buffer its caller reuses. It is the one scanner behind
// broker/wire's reading of frames and the bounded reading of the lists a client sends, in the broker's own params and
// in commands' parse, which may not import each other. A leaf: it imports nothing of crewlog.
//
// # Guarantees
//
//   - It walks VALID JSON only, as the frames broker/wire has validated (and the params taken from them) are: on
//     valid input every index it returns is the exact boundary encoding/json would find (tests and a fuzz target
//     hold it to encoding/json). On any other input it neither panics nor returns an index past the input, but its
//     answers mean nothing there; validating is broker/wire's.
//   - It allocates nothing, whatever the size of its input: a list of tens of thousands of elements is walked, not
//     decoded, so a caller can refuse it past its bound at no cost but the walk. AppendString, which decodes a
//     string, grows only the buffer its caller passes, so that tens of thousands of keys are compared in one.
//   - A walk is one pass, linear in the bytes walked; nesting costs a counter, not a stack.
package jsonscan
