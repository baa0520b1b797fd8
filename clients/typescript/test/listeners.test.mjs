// The client's listeners (a subscription's onEvent, the client's events) that throw or reject: their error goes to
// onListenerError, and the client reads on, never an exception out of its socket's handlers that stops it.
import assert from "node:assert/strict";
import { test } from "node:test";

import { CrewClient } from "../src/index.js";
import { serveEvery, serveRequests } from "./_fakebroker.mjs";

const frame = (f) => JSON.stringify(f) + "\n";

test("a listener that throws or rejects is reported to onListenerError, and the frames after it in the read are delivered", { timeout: 10_000 }, async (t) => {
  // The subscription's answer and every push after it come in one write, so in one read of the client's.
  const path = await serveRequests(t, (req, send, sock) => {
    if (req.method !== "events.subscribe") return send({ id: req.id, result: { pong: true } });
    sock.write(frame({ id: req.id, result: { subscribed: true, sinceSeq: 0 } }) +
      frame({ event: "team.event", seq: 1, data: { metadata: { seq: 1 } } }) +
      frame({ event: "mailbox.message", data: { messageId: "m1" } }) +
      frame({ event: "some.push", data: 1 }) +
      frame({ event: "team.event", seq: 2, data: { metadata: { seq: 2 } } }));
  });
  const reported = [];
  const c = await CrewClient.connect({
    socketPath: path,
    credentials: { role: "admin", token: "x" },
    onListenerError: (err, source) => reported.push([source, err.message]),
  });
  t.after(() => c.close());
  const mailbox = [];
  c.on("mailbox", () => {
    throw new Error("mailbox listener");
  });
  c.on("mailbox", (m) => mailbox.push(m.messageId)); // the listeners after one that throws are called too
  c.on("push", async () => {
    throw new Error("push listener"); // an async listener's rejection
  });
  const seqs = [];
  let second;
  const secondDelivered = new Promise((resolve) => (second = resolve));
  c.subscribe({
    runId: "R",
    onEvent: (ev) => {
      seqs.push(ev.metadata.seq);
      if (ev.metadata.seq === 2) second();
      throw new Error(`onEvent ${ev.metadata.seq}`);
    },
  });
  await secondDelivered;
  assert.deepEqual(await c.call("ping"), { pong: true }, "the client reads on");
  assert.deepEqual(seqs, [1, 2]);
  assert.deepEqual(mailbox, ["m1"]);
  // NB: the push listener's rejection is reported once it settles, after the frames of its read.
  assert.deepEqual(reported.sort(), [
    ["mailbox", "mailbox listener"],
    ["onEvent", "onEvent 1"],
    ["onEvent", "onEvent 2"],
    ["push", "push listener"],
  ]);
});

test("a disconnect, reconnect or close listener that throws leaves the client to send its calls again and close", { timeout: 10_000 }, async (t) => {
  // The first connection is lost before the ping's answer; the second answers it.
  const path = await serveEvery(t, (req, send, sock, n) => {
    if (req.method === "hello") return send({ id: "hello", result: { ok: true } });
    if (n === 1) return sock.destroy();
    send({ id: req.id, result: { pong: true } });
  });
  const reported = [];
  const c = await CrewClient.connect({
    socketPath: path,
    credentials: { role: "admin", token: "x" },
    backoffMs: [0],
    onListenerError: (err, source) => reported.push([source, err.message]),
  });
  for (const event of ["disconnect", "reconnect", "close"]) {
    c.on(event, () => {
      throw new Error(`${event} listener`);
    });
  }
  assert.deepEqual(await c.call("ping"), { pong: true });
  await c.close();
  assert.deepEqual(reported, [
    ["disconnect", "disconnect listener"],
    ["reconnect", "reconnect listener"],
    ["close", "close listener"],
  ]);
});

test("without onListenerError a listener's error is a process warning, not an exception that stops the client", { timeout: 10_000 }, async (t) => {
  const path = await serveRequests(t, (req, send) => {
    send({ id: req.id, result: { pong: true } });
    send({ event: "mailbox.message", data: { messageId: "m1" } });
  });
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "secret-token" } });
  t.after(() => c.close());
  const warned = new Promise((resolve) => process.once("warning", resolve));
  c.on("mailbox", () => {
    throw new Error("mailbox listener");
  });
  assert.deepEqual(await c.call("ping"), { pong: true });
  const warning = await warned;
  assert.equal(warning.name, "CrewClientListenerError");
  assert.match(warning.message, /mailbox listener threw: Error: mailbox listener/);
  assert.doesNotMatch(warning.message, /secret-token/);
  assert.deepEqual(await c.call("ping"), { pong: true }, "the client reads on");
});
