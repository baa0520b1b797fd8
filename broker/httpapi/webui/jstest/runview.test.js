// Unit tests of the run view's events (static/js/views/run.js), run by TestJavaScriptUnits: what it holds of a
// run's events, without a page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maxRunEvents } from '../static/js/api.js';
import { RunView } from '../static/js/views/run.js';

globalThis.requestAnimationFrame = () => 0;

const event = (position) => ({
  type: 'mailbox.appended', runId: 'R', time: new Date(position).toISOString(), data: {}, metadata: { position },
});

// quiet is a run view that only holds events: nothing is drawn or read from the API.
function quiet() {
  const v = new RunView({}, 'R', 'events');
  v.refresh = () => {};
  v.redraw = () => {};
  return v;
}

test('a long stream does not grow the run view without bound: the oldest events go', () => {
  const v = quiet();
  const total = maxRunEvents + 25000;
  for (let p = 1; p <= total; p++) v.onEvent(event(p));
  assert.ok(v.events.length <= maxRunEvents, `${v.events.length} events held`);
  assert.equal(v.positions.length, v.events.length);
  assert.deepEqual(v.events.map((e) => e.metadata.position), v.positions);
  assert.equal(v.positions.at(-1), total, 'the newest event is held');
  assert.equal(v.eventsDropped + v.events.length, total, 'every event is held or counted as let go');
  assert.equal(v.lastPosition, total);

  // A resync reads the run again from its start: what was let go stays gone, and is not counted twice.
  const before = [...v.positions];
  const dropped = v.eventsDropped;
  v.addEvents(Array.from({ length: 1000 }, (_, i) => event(i + 1)));
  assert.deepEqual(v.positions, before);
  assert.equal(v.eventsDropped, dropped);
});

test('time travel keeps its position while the oldest events go', () => {
  const v = quiet();
  for (let p = 1; p <= maxRunEvents; p++) v.onEvent(event(p));
  const at = maxRunEvents - 100;
  v.travelIndex = v.positions.indexOf(at);
  v.past = { position: at, run: { runId: 'R' } };
  for (let p = maxRunEvents + 1; p <= maxRunEvents + 10000; p++) v.onEvent(event(p));
  assert.ok(v.events.length <= maxRunEvents);
  assert.equal(v.positions[v.travelIndex], at);
});
