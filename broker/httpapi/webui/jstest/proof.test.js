// Unit tests of the session's proof in static/js/api.js (a fake localStorage, fetch and EventSource), run by
// TestJavaScriptUnits: the login's fragment is kept if crewd takes it, and goes with every request and the stream.
import { test } from 'node:test';
import assert from 'node:assert/strict';

const stored = new Map();
globalThis.localStorage = {
  getItem: (k) => (stored.has(k) ? stored.get(k) : null),
  setItem: (k, v) => stored.set(k, String(v)),
};
const opened = [];
globalThis.EventSource = class {
  constructor(url) {
    this.url = url;
    opened.push(this);
  }
  addEventListener() {}
  close() {}
};
const { all, get, keepProof, Stream } = await import('../static/js/api.js');

// answering has fetch answer every request with status, and records each request's headers.
function answering(status) {
  const sent = [];
  globalThis.fetch = async (url, init) => {
    sent.push(init.headers);
    return new Response('{}', { status, headers: { 'Content-Type': 'application/json' } });
  };
  return sent;
}

test('a login fragment is kept once crewd takes it, and nothing else is taken for a proof', async () => {
  const sent = answering(200);
  assert.equal(await keepProof('#/runs'), false);
  assert.equal(await keepProof('#proof=a"b'), false);
  assert.equal(await keepProof('#proof='), false);
  assert.equal(sent.length, 0);
  assert.equal(stored.size, 0);
  assert.equal(await keepProof('#proof=Ab0_-9'), true);
  assert.equal(sent[0]['X-Crewlog-Proof'], 'Ab0_-9', 'crewd is asked whether it takes the proof');
  assert.equal(stored.get('crewlog.proof'), 'Ab0_-9');
});

test('a proof crewd refuses (another page chose the fragment) does not replace the one kept', async () => {
  answering(200);
  await keepProof('#proof=good');
  answering(401);
  assert.equal(await keepProof('#proof=forged'), true);
  assert.equal(stored.get('crewlog.proof'), 'good');
});

test('an answer given before authentication (503 while crewd stops, 403 for the Host) does not take a proof', async () => {
  answering(200);
  await keepProof('#proof=good');
  for (const status of [503, 403]) {
    answering(status);
    assert.equal(await keepProof('#proof=forged'), true);
    assert.equal(stored.get('crewlog.proof'), 'good', `answered ${status}`);
  }
  answering(429);
  await keepProof('#proof=later');
  assert.equal(stored.get('crewlog.proof'), 'later', 'too-many-reads comes after authentication');
});

test('all asks for no more than its max still wants, whatever a page holds', async () => {
  const limits = [];
  globalThis.fetch = async (url) => {
    const limit = Number(new URL(url, 'http://x').searchParams.get('limit'));
    limits.push(limit);
    const n = Math.min(limit, 600); // a page that ends early, as a page of large events does
    return new Response(JSON.stringify({ items: Array(n).fill({}), hasMore: true, nextCursor: 'c' }),
      { status: 200, headers: { 'Content-Type': 'application/json' } });
  };
  const got = await all('/list', 'items', {}, { max: 1000 });
  assert.deepEqual(limits, [1000, 400]);
  assert.equal(got.items.length, 1000);
  assert.equal(got.truncated, true);
});

test('every read and the stream carry the proof', async () => {
  answering(200);
  await keepProof('#proof=Zz_-1');
  const sent = answering(200);
  await get('/slots');
  assert.equal(sent[0]['X-Crewlog-Proof'], 'Zz_-1');
  new Stream({}).open(7);
  assert.equal(opened[0].url, '/api/v1/stream?after=7&proof=Zz_-1');
});
