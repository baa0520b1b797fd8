// Unit tests of the Stream in static/js/api.js against a fake EventSource, run by TestJavaScriptUnits.
import { test } from 'node:test';
import assert from 'node:assert/strict';

// FakeEventSource records what the page opened and lets the test play the server.
class FakeEventSource {
  static CLOSED = 2;
  static opened = [];
  constructor(url) {
    this.url = url;
    this.listeners = {};
    this.readyState = 1;
    FakeEventSource.opened.push(this);
  }
  addEventListener(name, fn) {
    (this.listeners[name] ||= []).push(fn);
  }
  close() {
    this.readyState = FakeEventSource.CLOSED;
  }
  emit(name, data) {
    for (const fn of this.listeners[name] || []) fn({ data: JSON.stringify(data) });
  }
}
globalThis.EventSource = FakeEventSource;
const { Stream } = await import('../static/js/api.js');

const event = (type, position) => ({ type, runId: 'R', data: {}, metadata: { position } });

function recorder() {
  const got = { events: [], resyncs: 0, hellos: 0, states: [] };
  const s = new Stream({
    onEvent: (ev) => got.events.push(ev.metadata.position),
    onResync: () => got.resyncs++,
    onHello: () => got.hellos++,
    onState: (st) => got.states.push(st),
  });
  return { s, got };
}

test('every event type reaches the page once, in position order', () => {
  FakeEventSource.opened = [];
  const { s, got } = recorder();
  s.open();
  const es = FakeEventSource.opened[0];
  assert.equal(es.url, '/api/v1/stream');
  es.emit('hello', { head: 10 });
  es.emit('delegate.admitted', event('delegate.admitted', 11));
  es.emit('budget.reserved', event('budget.reserved', 12));
  es.emit('budget.reserved', event('budget.reserved', 12)); // a repeat (a reconnect's overlap) is dropped
  es.emit('task.created', event('task.created', 9)); // before the hello's head: already read by the views
  assert.deepEqual(got.events, [11, 12]);
  assert.equal(got.hellos, 1);
  assert.deepEqual(got.states, ['connecting', 'live']);
});

test('a resync closes the stream, has the views re-read and reopens live', () => {
  FakeEventSource.opened = [];
  const { s, got } = recorder();
  s.open();
  const first = FakeEventSource.opened[0];
  first.emit('hello', { head: 1 });
  first.emit('run.running', event('run.running', 2));
  first.emit('resync', { fromPosition: 3, reason: 'client fell behind its byte budget' });
  assert.equal(first.readyState, FakeEventSource.CLOSED);
  assert.equal(got.resyncs, 1);
  assert.equal(FakeEventSource.opened.length, 2);
  const second = FakeEventSource.opened[1];
  assert.equal(second.url, '/api/v1/stream', 'reopened live, not from the position it fell behind at');
  second.emit('hello', { head: 50 });
  second.emit('run.completed', event('run.completed', 51));
  assert.deepEqual(got.events, [2, 51]);
  assert.equal(got.hellos, 2, 'each connection says hello, so the views catch up what no stream carried');
});

test('open after a position asks the server to resume there', () => {
  FakeEventSource.opened = [];
  const { s } = recorder();
  s.open(41);
  assert.equal(FakeEventSource.opened[0].url, '/api/v1/stream?after=41');
  s.close();
  assert.equal(FakeEventSource.opened[0].readyState, FakeEventSource.CLOSED);
});
