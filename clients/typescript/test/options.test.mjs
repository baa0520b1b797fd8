// The client's options: a value that is no number of the kind asked (NaN, a negative, Infinity) is refused with a
// TypeError naming it, the backoff between attempts has jitter, and every call has a deadline of its own.
import assert from "node:assert/strict";
import { test } from "node:test";

import { CrewClient } from "../src/index.js";
import { serveEvery, serveRequests } from "./_fakebroker.mjs";

const base = { socketPath: "/nowhere/b.sock", credentials: { role: "admin", token: "x" } };

test("a client option of the wrong kind is refused at construction with a TypeError naming it", () => {
  const bad = {
    reconnect: ["no", 1],
    backoffMs: [[NaN], [-1], [Infinity], ["20"], 20],
    connectTimeoutMs: [NaN, 0, -1, Infinity, 2 ** 31, "5000"],
    maxFrame: [NaN, 0, -1, 1.5, Infinity],
    maxQueuedBytes: [NaN, 0, -1, 1.5, Infinity],
    callTimeoutMs: [NaN, 0, -1, 2 ** 31, "1000"],
    random: [0.5, "Math.random"],
    onListenerError: ["console.error"],
  };
  for (const [name, values] of Object.entries(bad)) {
    for (const value of values) {
      assert.throws(() => new CrewClient({ ...base, [name]: value }), (err) => {
        assert.ok(err instanceof TypeError, `${name}: ${String(value)}: ${err}`);
        assert.match(err.message, new RegExp(`options\\.${name}\\b`));
        return true;
      });
    }
  }
  const good = { reconnect: false, backoffMs: [0, 10.5], connectTimeoutMs: 1, maxFrame: 1024, maxQueuedBytes: 1, callTimeoutMs: Infinity };
  for (const [name, value] of Object.entries(good)) new CrewClient({ ...base, [name]: value });
  new CrewClient({ ...base, ...Object.fromEntries(Object.keys(bad).map((name) => [name, undefined])) }); // the defaults
});

test("a subscription's highWaterMark or highWaterMarkBytes of the wrong kind is refused with a TypeError, and the subscription held stays", { timeout: 10_000 }, async (t) => {
  const path = await serveRequests(t, (req, send) => send({ id: req.id, result: { subscribed: true, sinceSeq: 0 } }));
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" } });
  t.after(() => c.close());
  const held = c.subscribe({ runId: "R" });
  for (const name of ["highWaterMark", "highWaterMarkBytes"]) {
    for (const value of [NaN, 0, -1, 1.5, Infinity, "10"]) {
      assert.throws(() => c.subscribe({ runId: "R", [name]: value }), (err) => {
        assert.ok(err instanceof TypeError, `${name}: ${String(value)}: ${err}`);
        assert.match(err.message, new RegExp(`options\\.${name}\\b`));
        return true;
      });
    }
  }
  assert.equal(held.closed, false, "a refused subscribe() does not replace the subscription");
  c.subscribe({ runId: "R", highWaterMark: 1 });
  assert.equal(held.closed, true);
});

test("a call's timeoutMs of the wrong kind is refused with a TypeError, nothing sent", async (t) => {
  const c = new CrewClient(base);
  t.after(() => c.close());
  for (const timeoutMs of [NaN, 0, -1, 2 ** 31, "100"]) {
    await assert.rejects(c.call("ping", {}, { timeoutMs }), (err) => {
      assert.ok(err instanceof TypeError, `${String(timeoutMs)}: ${err}`);
      assert.match(err.message, /timeoutMs/);
      return true;
    });
  }
  assert.equal(c.connected, false);
});

test("the waits between attempts to connect have jitter: each between half its backoffMs step and all of it", { timeout: 10_000 }, async (t) => {
  // Each connection is closed before its hello is answered.
  const path = await serveEvery(t, (_req, _send, sock) => sock.destroy());
  const draws = [0, 0.5, 0.999, NaN]; // NB: a draw outside [0, 1), NaN too, is the whole step
  const connectTimeoutMs = 99_999; // the other timer of an attempt, told apart by its length
  const timers = t.mock.method(globalThis, "setTimeout");
  const options = { backoffMs: [8, 16, 32, 64], connectTimeoutMs, callTimeoutMs: Infinity, random: () => draws.shift() };
  const c = new CrewClient({ ...base, socketPath: path, ...options });
  t.after(() => c.close());
  await assert.rejects(c.call("ping"), { code: "exhausted" });
  const waits = timers.mock.calls.map((call) => call.arguments[1]).filter((ms) => ms !== connectTimeoutMs);
  assert.deepEqual(waits, [4, 12, 31.984, 64]);
});

test("a call the broker never answers fails timeout after callTimeoutMs, a task.waitStatus after its wait and that", { timeout: 10_000 }, async (t) => {
  const path = await serveRequests(t, () => {}); // answers the hello, nothing else
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" }, callTimeoutMs: 100 });
  t.after(() => c.close());
  const timers = t.mock.method(globalThis, "setTimeout");
  const calls = [
    c.call("ping"),
    c.call("task.waitStatus", { runId: "R", taskId: "T", until: "running", timeoutMs: 200 }),
    c.call("run.create", { team: "t", goal: "g", cwd: "/" }, { timeoutMs: 150 }),
  ].map((p) => p.then(() => "answered", (err) => err.code));
  const checkpoint = c.call("admin.checkpoint", { dir: "/tmp/nowhere" }, {}).then(() => "answered", (err) => err.code);
  assert.deepEqual(timers.mock.calls.map((call) => call.arguments[1]), [100, 300, 150],
    "the broker answers a wait when it ends: the call's deadline is the wait and callTimeoutMs after it; a checkpoint has none");
  assert.deepEqual(await Promise.all(calls), ["timeout", "timeout", "timeout"]);
  await c.close();
  assert.equal(await checkpoint, "closed");
});
