// Package audit answers "what happened, and why" from a crewlog store, with
// no daemon: it replays the log into projections up to a position or a
// time, describes every event in one line, re-runs every recorded decision
// with today's code to find policy drift, compares rebuilt state with a
// snapshot or another view, and checks the domain invariants the fold must
// keep. cmd/crewctl is a thin shell over it.
//
// # Guarantees
//
//   - Nothing here writes to a store: Open is read-only, and Replay and
//     Check only read.
//   - Replay folds with projections.Apply, the same code the daemon runs,
//     so the rebuilt state is the daemon's state at that position.
//   - Explain re-runs a decision with commands.Decide on the state just
//     before it, with the config in force then, the recorded time as the
//     clock and the recorded ids as the id source. The decision is pure, so
//     a difference between decided and recorded events is a difference in
//     the code (policy drift), never in the machine or the moment.
//   - ExplainAt re-runs one decision on its run's state alone
//     (projections.RunAt), O(the run): the same Decision a full Replay
//     with Explain reports, the slots held in all and the other runs
//     waiting taken from what the decision recorded (events.Policy). Its
//     fold stops when its context ends, and nothing of it is kept.
//   - Replay's At and PositionAt resolve a time to the same position.
//   - Replay hands each timeline entry to its caller and keeps none, and
//     Timeline reads the same entries again up to where a replay stopped:
//     a timeline is printed without holding it, whatever the log's length.
//     With a Decision option, the explained decisions are handed on alike.
//   - Every problem names the first bad position.
//   - A comparison of states (CompareSnapshot, DiffAtMost) counts every
//     difference but holds only the first ones it is asked to list: two
//     states of a damaged store may differ at millions of places.
//
// # Limits
//
//   - A request's prompt is recorded only on admission and a result's text
//     only inside its message body: a rebuilt rejected request carries a
//     placeholder prompt, and a settlement's message body is not compared.
//     Neither is read by any policy check.
//   - Run and task transitions, messages and questions asked or answered
//     are folded but not re-run. A question's end by the engine clock
//     (ask.expire) is re-run, and one by its asker's end is explained
//     with that end's decision (a revocation, a settlement), or folded
//     with its task's transition (an end or a retry).
//     A decision imported from another system (pi-crew's history) is
//     explained from its record, not re-run: that system took it.
//   - Pebble locks a store even for read-only opens: a store held by a
//     running daemon is refused with ErrLocked. Audit a backup instead.
package audit
