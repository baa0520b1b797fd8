// A subscription whose iterator is not read: it buffers at most highWaterMark events and highWaterMarkBytes bytes of
// them, takes none while full, and subscribes again after the last one it took once they are read, so no event is
// lost or repeated; lastSeq counts only the events read, the cursor to subscribe again from.
import assert from "node:assert/strict";
import { test } from "node:test";

import { CrewClient } from "../src/index.js";
import { serveRequests } from "./_fakebroker.mjs";

// serveRun is a broker of a run of `events` events, each with a pad of padBytes: every events.subscribe is answered,
// then followed by the push of every event after its sinceSeq; the sinceSeq of each is kept in subscribes.
async function serveRun(t, events, padBytes = 0) {
  const subscribes = [];
  const path = await serveRequests(t, (req, send) => {
    if (req.method !== "events.subscribe") return send({ id: req.id, result: { pong: true, protocol: 1 } });
    const since = req.params.sinceSeq;
    subscribes.push(since);
    send({ id: req.id, result: { subscribed: true, sinceSeq: since } });
    for (let seq = since + 1; seq <= events; seq++) send(push(seq, padBytes));
  });
  return { path, subscribes };
}

const push = (seq, padBytes) => ({ event: "team.event", seq, data: { metadata: { seq }, pad: "x".repeat(padBytes) } });

// framesBytes is the bytes of the frames of events 1..n.
const framesBytes = (n, padBytes) => range(1, n).reduce((sum, seq) => sum + Buffer.byteLength(JSON.stringify(push(seq, padBytes)) + "\n"), 0);

async function connect(t, path, options = {}) {
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "orchestrator", runId: "R", token: "x" }, ...options });
  t.after(() => c.close());
  return c;
}

// readSeqs reads n events of sub and returns their seqs.
async function readSeqs(sub, n) {
  const seqs = [];
  for (let i = 0; i < n; i++) {
    const { value, done } = await sub.next();
    assert.equal(done, false, "the subscription ended");
    seqs.push(value.metadata.seq);
  }
  return seqs;
}

const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

test("events pushed while the buffer is full are not taken, and are read after it from the broker again", { timeout: 10_000 }, async (t) => {
  const { path, subscribes } = await serveRun(t, 10);
  const c = await connect(t, path);
  const sub = c.subscribe({ highWaterMark: 3 });
  await c.call("ping"); // answered after every push of the subscription: all ten were read off the socket
  assert.deepEqual(subscribes, [0]);
  assert.deepEqual(await readSeqs(sub, 10), range(1, 10));
  assert.equal(subscribes[1], 3, "subscribed again after the last event buffered, once it was read");
  assert.equal(sub.lastSeq, 10);
});

test("lastSeq is the last event read, not the last buffered: subscribing again after it misses nothing", { timeout: 10_000 }, async (t) => {
  const { path } = await serveRun(t, 5);
  const c = await connect(t, path);
  const sub = c.subscribe();
  await c.call("ping");
  assert.equal(sub.lastSeq, 0, "five events buffered, none read");
  assert.deepEqual(await readSeqs(sub, 2), [1, 2]);
  assert.equal(sub.lastSeq, 2);
  sub.close();
  const again = c.subscribe({ sinceSeq: sub.lastSeq });
  assert.deepEqual(await readSeqs(again, 3), [3, 4, 5]);
});

test("the events buffered are bounded in bytes too (by default 64 frames at maxFrame)", { timeout: 10_000 }, async (t) => {
  const maxFrame = 4096;
  const events = 100; // about 300 KiB of events: over 64 frames of 4 KiB, far under highWaterMark's 10000
  const { path, subscribes } = await serveRun(t, events, 3000);
  const c = await connect(t, path, { maxFrame });
  const sub = c.subscribe();
  await c.call("ping");
  assert.deepEqual(await readSeqs(sub, events), range(1, events));
  assert.equal(subscribes.length, 2, `sinceSeq of each subscribe: ${subscribes}`);
  const buffered = subscribes[1];
  assert.ok(framesBytes(buffered, 3000) <= 64 * maxFrame, `${buffered} events buffered: more than 64 frames' bytes`);
  assert.ok(framesBytes(buffered + 1, 3000) > 64 * maxFrame, `${buffered} events buffered: one more would fit`);

  const small = await serveRun(t, 10, 3000);
  const d = await connect(t, small.path, { maxFrame });
  const bounded = d.subscribe({ highWaterMarkBytes: 4 * maxFrame });
  await d.call("ping");
  assert.deepEqual(await readSeqs(bounded, 10), range(1, 10));
  assert.deepEqual(small.subscribes.slice(0, 2), [0, 5], "five events of 3 KiB fill 16 KiB");
});
