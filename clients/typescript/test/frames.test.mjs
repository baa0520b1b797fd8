// The client against a broker that misbehaves on the wire: a line that is JSON but not an object is a protocol
// error that ends the connection, never a throw out of the socket's data handler.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { createConnection } from "node:net";
import { join } from "node:path";
import { test } from "node:test";

import { CrewClient } from "../src/index.js";
import { fakeBroker, listen, serveEvery, serveRequests } from "./_fakebroker.mjs";

for (const line of ["null", "42", '"pong"', "[]", "true"]) {
  test(`a frame that is ${line}, not an object, fails the call with protocol`, { timeout: 30_000 }, async (t) => {
    const socketPath = await fakeBroker(t, () => line);
    const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" } });
    t.after(() => c.close());
    await assert.rejects(c.call("ping"), { code: "protocol" });
  });
}

test("calls to a broker that stops reading are refused busy once maxQueuedBytes wait, not queued without end", { timeout: 30_000 }, async (t) => {
  const path = await listen(t, (sock) => {
    sock.setEncoding("utf8");
    sock.on("error", () => {});
    sock.once("data", () => {
      sock.write(JSON.stringify({ id: "hello", result: { ok: true } }) + "\n");
      sock.pause(); // reads nothing more
    });
  });
  const maxQueuedBytes = 1 << 20;
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" }, maxQueuedBytes });
  const pad = "x".repeat(200_000);
  const outcomes = [];
  for (let i = 0; i < 200; i++) {
    outcomes.push(c.call("ping", { pad }).then(() => "answered", (err) => err.code));
    await new Promise((resolve) => setImmediate(resolve)); // let the socket hand what it can to the kernel
  }
  await c.close();
  const codes = await Promise.all(outcomes);
  const busy = codes.filter((code) => code === "busy").length;
  // 200 calls of 200 KB are 40 MB; the kernel takes a few hundred KB of them, the client at most maxQueuedBytes more
  // (here 6 calls were sent in all).
  assert.ok(busy > 0, "some calls were refused busy");
  assert.ok(200 - busy <= 20, `at most the kernel's buffer and maxQueuedBytes were sent: ${200 - busy} calls were`);
  assert.deepEqual(new Set(codes), new Set(["busy", "closed"]));
});

test("calls made while no connection carries them are refused busy once maxQueuedBytes of them wait, not kept without end", { timeout: 10_000 }, async (t) => {
  const path = await serveEvery(t, () => {}); // never answers the hello: the client waits for a connection
  const maxQueuedBytes = 4096;
  const c = new CrewClient({ socketPath: path, credentials: { role: "admin", token: "x" }, maxQueuedBytes, connectTimeoutMs: 60_000, callTimeoutMs: Infinity });
  const pad = "x".repeat(1000); // a request of about 1050 bytes: three fit in 4096, a fourth would not
  const outcomes = [];
  for (let i = 0; i < 10; i++) outcomes.push(c.call("ping", { pad }).then(() => "answered", (err) => err.code));
  const refused = outcomes.slice(3);
  assert.deepEqual(await Promise.all(refused), Array(7).fill("busy"));
  await c.close();
  assert.deepEqual(await Promise.all(outcomes.slice(0, 3)), Array(3).fill("closed"));
});

test("a subscription whose events.subscribe does not fit in a frame ends with encode-failed, not waits forever", { timeout: 10_000 }, async (t) => {
  const socketPath = await fakeBroker(t, (req) => JSON.stringify({ id: req.id, result: { subscribed: true, sinceSeq: 0 } }));
  const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" }, maxFrame: 1024 });
  t.after(() => c.close());
  const types = Array.from({ length: 64 }, (_, i) => `some.event.type.${i}`); // about 1.5 KB of params
  const sub = c.subscribe({ runId: "R", types });
  await assert.rejects(sub.next(), { code: "encode-failed" });
  assert.equal(sub.closed, true);
});

test("a hello that does not fit in a frame fails the connect with encode-failed at once, not after every retry's timeout", { timeout: 10_000 }, async (t) => {
  const socketPath = await fakeBroker(t, () => "{}");
  await assert.rejects(
    CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x".repeat(2000) }, maxFrame: 1024 }),
    { code: "encode-failed" },
  );
});

test("an answer over maxFrame fails the calls it may answer with oversize-frame, not a reconnect that gets it again", { timeout: 10_000 }, async (t) => {
  let hellos = 0;
  const socketPath = await fakeBroker(t, (req) => JSON.stringify({ id: req.id, result: { pad: "x".repeat(req.params?.big ? 300_000 : 0) } }));
  const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" }, maxFrame: 1024 });
  t.after(() => c.close());
  c.on("reconnect", () => hellos++);
  await assert.rejects(c.call("ping", { big: true }), { code: "oversize-frame", method: "ping" });
  assert.deepEqual(await c.call("ping"), { pad: "" }, "the client carries on");
  assert.ok(hellos <= 1, `${hellos} reconnects`);
});

test("a call made on an answer read just before a frame over maxFrame is sent on the next connection, not failed with that frame", { timeout: 10_000 }, async (t) => {
  // The broker writes the answer to the first ping and, in the same write, a line over maxFrame.
  const socketPath = await fakeBroker(t, (req) => JSON.stringify({ id: req.id, result: { pad: "" } }) +
    (req.params?.first ? "\n" + JSON.stringify({ id: "x", result: { pad: "x".repeat(2000) } }) : ""));
  const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" }, maxFrame: 1024 });
  t.after(() => c.close());
  const second = await c.call("ping", { first: true }).then(() => c.call("ping").then((r) => r, (err) => err.code));
  assert.deepEqual(second, { pad: "" }, "the second call was not sent on the connection the oversize frame closed");
});

test("a subscription made on an answer read just before a frame over maxFrame is made on the next connection, not ended with that frame", { timeout: 10_000 }, async (t) => {
  // The broker writes the answer to the first ping and, in the same write, a line over maxFrame.
  const socketPath = await fakeBroker(t, (req) => JSON.stringify({ id: req.id, result: { pad: "" } }) +
    (req.params?.first ? "\n" + JSON.stringify({ id: "x", result: { pad: "x".repeat(2000) } }) : ""));
  const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" }, maxFrame: 1024 });
  t.after(() => c.close());
  const reconnected = new Promise((resolve) => c.once("reconnect", resolve));
  const sub = await c.call("ping", { first: true }).then(() => c.subscribe({ runId: "R" }));
  await reconnected;
  await c.call("ping"); // sent after the subscription on the new connection, answered after it
  assert.equal(sub.closed, false, "the subscription was ended with a frame that came before it was made");
});

test("a call waiting for a connection whose hello answer came with a frame over maxFrame is sent on the next one, not failed with that frame", { timeout: 10_000 }, async (t) => {
  // The first connection is lost before the ping's answer; the second's hello answer comes in one write with a line
  // over maxFrame, which closes it before the ping could be sent on it; the third answers.
  let conns = 0;
  const path = await serveEvery(t, (req, send, sock, n) => {
    conns = n;
    if (req.method !== "hello" && n === 1) return sock.destroy(); // the answer is lost
    if (req.method !== "hello") return send({ id: req.id, result: { pong: true } });
    const answer = JSON.stringify({ id: req.id, result: { ok: true } }) + "\n";
    sock.write(n === 2 ? answer + JSON.stringify({ event: "x", data: "x".repeat(2000) }) + "\n" : answer);
  });
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" }, maxFrame: 1024 });
  t.after(() => c.close());
  const outcome = await c.call("ping").then((r) => r, (err) => err.code);
  assert.deepEqual(outcome, { pong: true });
  assert.equal(conns, 3);
});

test("a call whose params JSON cannot write fails encode-failed alone: the calls after it are sent, on the same connection", { timeout: 10_000 }, async (t) => {
  let hellos = 0;
  const socketPath = await serveEvery(t, (req, send) => {
    if (req.method === "hello") hellos++;
    send({ id: req.id, result: { ok: true } });
  });
  const cycle = {};
  cycle.self = cycle;
  const c = new CrewClient({ socketPath, credentials: { role: "admin", token: "x" }, backoffMs: [10, 10] });
  t.after(() => c.close());
  // Made before the client connects, sent together once it has; then again on the connection it holds.
  for (const unwritable of [{ n: 1n }, cycle]) {
    const outcomes = await Promise.all([c.call("ping", unwritable), c.call("ping")].map((p) => p.then(
      () => "answered",
      (err) => err.code ?? err.name,
    )));
    assert.deepEqual(outcomes, ["encode-failed", "answered"]);
  }
  assert.equal(hellos, 1);
});

test("a subscription or a hello that JSON cannot write ends encode-failed, not throws or waits forever", { timeout: 10_000 }, async (t) => {
  const socketPath = await serveEvery(t, (req, send) => send({ id: req.id, result: { ok: true } }));
  const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" } });
  t.after(() => c.close());
  const sub = c.subscribe({ runId: "R", types: [1n] });
  await assert.rejects(sub.next(), { code: "encode-failed" });
  await assert.rejects(
    CrewClient.connect({ socketPath, credentials: { role: "orchestrator", runId: "R", taskId: 1n, token: "x" }, backoffMs: [] }),
    { code: "encode-failed" },
  );
});

test("an answer of exactly maxFrame bytes is read, one of a byte more is refused however the reads cut it", { timeout: 10_000 }, async (t) => {
  // size is the answer's bytes with its newline.
  const answer = (req) => {
    const bare = JSON.stringify({ id: req.id, result: { pad: "" } }).length + 1;
    return JSON.stringify({ id: req.id, result: { pad: "x".repeat(req.params.size - bare) } });
  };
  const socketPath = await fakeBroker(t, answer);
  const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" }, maxFrame: 1024 });
  t.after(() => c.close());
  assert.equal((await c.call("ping", { size: 1024 })).pad.length > 0, true);
  await assert.rejects(c.call("ping", { size: 1025 }), { code: "oversize-frame" });
  assert.equal((await c.call("ping", { size: 1024 })).pad.length > 0, true);
});

test("a call made as the one before it fails exhausted dials again and settles, not waits on the attempt that failed", { timeout: 10_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "crewlog-frames-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const c = new CrewClient({ socketPath: join(dir, "nobody.sock"), credentials: { role: "admin", token: "x" }, backoffMs: [] });
  t.after(() => c.close());
  // The retry is made in the rejection's own handler, before anything else the failed attempt had left to do.
  const again = await c.call("ping").catch(() => c.call("ping").then(() => "answered", (err) => err.code));
  assert.equal(again, "exhausted");
});

test("a connect that fails names what the socket answered (no such file, refused), not only that it failed", { timeout: 10_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "crewlog-frames-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const options = { socketPath: join(dir, "nobody.sock"), credentials: { role: "admin", token: "x" }, backoffMs: [] };
  await assert.rejects(CrewClient.connect(options), (err) => {
    assert.equal(err.code, "exhausted");
    assert.match(err.message, /ENOENT/);
    return true;
  });
});

test("close() while a hello waits for its answer closes that connection, and leaves no timer to keep the process", { timeout: 10_000 }, async (t) => {
  let accepted;
  const acceptedP = new Promise((resolve) => (accepted = resolve));
  const path = await listen(t, (sock) => {
    sock.on("error", () => {});
    accepted({ closed: new Promise((resolve) => sock.once("close", resolve)) }); // reads the hello, never answers it
  });
  const c = new CrewClient({ socketPath: path, credentials: { role: "admin", token: "x" }, connectTimeoutMs: 600_000 });
  const call = c.call("ping").then(() => "answered", (err) => err.code);
  const { closed } = await acceptedP;
  await c.close();
  assert.equal(await call, "closed");
  await closed; // else only after connectTimeoutMs
});

test("a subscription ends the same whether its next() waits or comes later: done after close(), an error when the connection is lost", { timeout: 10_000 }, async (t) => {
  const subscribed = (req) => JSON.stringify({ id: req.id, result: { subscribed: true, sinceSeq: 0 } });
  const socketPath = await fakeBroker(t, subscribed);
  const c = await CrewClient.connect({ socketPath, credentials: { role: "admin", token: "x" } });
  const waiting = c.subscribe({ runId: "R" }).next();
  await c.close();
  assert.deepEqual(await waiting, { value: undefined, done: true }, "close() ends a waiting next() as it ends a later one");

  const path = await serveRequests(t, (req, _send, sock) => sock.end(subscribed(req) + "\n")); // answers, and goes
  const lost = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" }, reconnect: false });
  t.after(() => lost.close());
  const disconnected = new Promise((resolve) => lost.once("disconnect", resolve));
  const sub = lost.subscribe({ runId: "R" });
  await disconnected;
  await assert.rejects(sub.next(), { code: "closed" }, "a lost connection is not the end of the events");
  assert.deepEqual(await sub.next(), { value: undefined, done: true }, "the error is delivered once");

  // The same when the next() waited for the connection to be lost: rejected once, then done.
  const waited = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" }, reconnect: false });
  t.after(() => waited.close());
  const waitingSub = waited.subscribe({ runId: "R" });
  await assert.rejects(waitingSub.next(), { code: "closed" });
  assert.deepEqual(await waitingSub.next(), { value: undefined, done: true }, "the error is delivered once");
});

test("a frame of id \"\" that is no error, before the hello answer, fails the connect with protocol, not taken for that answer", { timeout: 10_000 }, async (t) => {
  // id "" answers no request: the broker sends it only with an error that ends the connection. A result under it is
  // no answer to the hello, whose own answer comes after it here.
  const path = await listen(t, (sock) => {
    sock.on("error", () => {});
    sock.once("data", () => {
      sock.write(JSON.stringify({ id: "", result: { ok: true, run: "not-the-hello" } }) + "\n" +
        JSON.stringify({ id: "hello", result: { ok: true, run: "R" } }) + "\n");
    });
  });
  const options = { socketPath: path, credentials: { role: "admin", token: "x" }, backoffMs: [] };
  const outcome = await CrewClient.connect(options).then(
    async (c) => {
      await c.close();
      return `connected, its hello answered ${JSON.stringify(c.hello)}`;
    },
    (err) => err.code,
  );
  assert.equal(outcome, "protocol");
});

test("a resync that comes while the subscription is being replaced is the old one's: it asks no second replay", { timeout: 10_000 }, async (t) => {
  const subscribes = [];
  const path = await serveRequests(t, (req, send) => {
    subscribes.push(req.params.sinceSeq);
    if (subscribes.length === 1) {
      send({ id: req.id, result: { ok: true } });
      send({ event: "resync", data: { fromSeq: 0 } }); // the subscription fell behind
      return;
    }
    // The old subscription's queue still held a resync when the re-subscribe came: it is written before the answer,
    // which comes before the new subscription's pushes. (Once only, so that a client taking it for the new one's is
    // answered a third time rather than in a loop.)
    if (subscribes.length === 2) send({ event: "resync", data: { fromSeq: 0 } });
    send({ id: req.id, result: { ok: true } });
    for (const seq of [1, 2, 3]) send({ event: "team.event", seq, data: { metadata: { seq } } });
  });
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" } });
  t.after(() => c.close());
  const sub = c.subscribe({ sinceSeq: 0 });
  const seqs = [];
  for await (const ev of sub) {
    seqs.push(ev.metadata.seq);
    if (seqs.length === 3) break;
  }
  assert.deepEqual(seqs, [1, 2, 3]);
  assert.deepEqual(subscribes, [0, 0], "one re-subscribe for the one resync of the live subscription");
  assert.equal(sub.resyncs, 1);
});

for (const code of ["revoked", "stale-token"]) {
  test(`${code} in answer to a call stops the client as it does with id "": no hello more, the calls on its connection fail ${code}`, { timeout: 10_000 }, async (t) => {
    // The broker answers the connection's first request with the closing code, and closes it.
    let hellos = 0;
    const path = await serveEvery(t, (req, send, sock) => {
      if (req.method === "hello") {
        hellos++;
        return send({ id: "hello", result: { ok: true } });
      }
      if (sock.answered) return;
      sock.answered = true;
      sock.end(JSON.stringify({ id: req.id, error: { code, message: "credential ended" } }) + "\n");
    });
    const c = await CrewClient.connect({ socketPath: path, credentials: { role: "admin", token: "x" }, backoffMs: [0] });
    t.after(() => c.close());
    const disconnected = new Promise((resolve) => c.once("disconnect", resolve));
    const outcomes = await Promise.all([c.call("ping"), c.call("ping")].map((p) => p.then(() => "answered", (err) => err.code)));
    assert.deepEqual(outcomes, [code, code]);
    assert.equal((await disconnected).code, code);
    await assert.rejects(c.call("ping"), { code });
    assert.equal(hellos, 1, "a credential that ended is not tried again");
  });
}

test("a call made by a disconnect listener when the credential ended fails with its code, and dials no more", { timeout: 10_000 }, async (t) => {
  // The first connection's hello is answered, then the credential ends (id ""); a probe, which the server accepts
  // after every connection the client opened before it, tells how many the client opened.
  let conns = 0;
  let probed;
  const probe = new Promise((resolve) => (probed = resolve));
  const path = await listen(t, (sock) => {
    const n = ++conns;
    sock.on("error", () => {});
    sock.once("data", (chunk) => {
      if (String(chunk).startsWith("probe")) return probed(n);
      if (n === 1) {
        sock.end(JSON.stringify({ id: "hello", result: { ok: true } }) + "\n" +
          JSON.stringify({ id: "", error: { code: "revoked", message: "credential revoked" } }) + "\n");
      }
    });
  });
  const c = new CrewClient({ socketPath: path, credentials: { role: "admin", token: "x" }, backoffMs: [0] });
  t.after(() => c.close());
  const again = new Promise((resolve) => c.once("disconnect", () => resolve(c.call("ping").then(() => "answered", (err) => err.code))));
  assert.equal(await c.call("ping").then(() => "answered", (err) => err.code), "revoked");
  assert.equal(await again, "revoked");
  const sock = createConnection(path, () => sock.write("probe\n"));
  t.after(() => sock.destroy());
  assert.equal(await probe, 2, "the client dialed again with the credential that ended");
});
