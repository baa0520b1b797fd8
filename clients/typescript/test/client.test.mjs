// The client against a real crewd (built by the test): hello, multiplexed calls, typed refusals, a command whose
// answer is lost, subscriptions that resume after a resync frame, a lost connection and a daemon restart, and
// task.waitStatus sent again after a lost connection with the time its caller has left.
import assert from "node:assert/strict";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { BrokerError, CrewClient } from "../src/index.js";
import { startCrewd } from "./_crewd.mjs";
import { startProxy } from "./_proxy.mjs";

let d;
let admin;
let runs = 0;

before(async () => {
  d = await startCrewd();
  admin = await CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "admin", token: d.adminToken } });
});

after(async () => {
  await admin?.close();
  await d?.close();
});

// closing registers c (a client or a proxy) to be closed when test t ends, passed or not, so that nothing left
// open keeps the test process alive.
function closing(t, c) {
  t.after(() => c.close());
  return c;
}

// newRun creates a running run with running tasks P and Q, and returns the orchestrator's client and P's token.
async function newRun(t) {
  const runId = `R${++runs}`;
  const run = await admin.call("run.create", { runId, team: "t", goal: "g", cwd: "/w" });
  const orch = closing(t, await CrewClient.connect({
    socketPath: d.socketPath,
    credentials: { role: "orchestrator", runId, token: run.orchestratorToken },
  }));
  await orch.call("run.transition", { to: "running" });
  for (const taskId of ["P", "Q"]) {
    await orch.call("task.create", { taskId, role: "executor", agent: "a", title: taskId, cwd: `/w/${taskId}` });
    await orch.call("task.transition", { taskId, to: "running" });
  }
  const { token } = await orch.call("credential.issue", { taskId: "P" });
  return { runId, orch, orchToken: run.orchestratorToken, token };
}

// seqsUntil reads sub until it has delivered seq `last`, and returns every seq it delivered. (It calls next()
// itself: leaving a for await loop early would close the subscription.)
async function seqsUntil(sub, last) {
  const seqs = [];
  while (seqs.length === 0 || seqs.at(-1) < last) {
    const { value, done } = await sub.next();
    assert.equal(done, false, "the subscription ended");
    seqs.push(value.metadata.seq);
  }
  return seqs;
}

const range = (n) => Array.from({ length: n }, (_, i) => i + 1);

async function headSeq(orch) {
  return (await orch.call("query.run")).usage.events;
}

test("hello answers with the run, and calls are multiplexed: a waitStatus sent first answers last", { timeout: 60_000 }, async (t) => {
  const { runId, orch } = await newRun(t);
  assert.equal(orch.hello.ok, true);
  assert.equal(orch.hello.run, runId);
  await orch.call("task.create", { taskId: "W", role: "executor", agent: "a", title: "w", cwd: "/w/w" });
  let waited = false;
  const wait = orch.call("task.waitStatus", { taskId: "W", until: "running", timeoutMs: 60000 }).then((r) => {
    waited = true;
    return r;
  });
  const created = await Promise.all(
    range(40).map((i) => orch.call("task.create", { taskId: `T${i}`, role: "explorer", agent: "a", title: `t${i}`, cwd: `/w/${i}` })),
  );
  assert.deepEqual(created.map((r) => r.taskId), range(40).map((i) => `T${i}`));
  assert.equal(waited, false, "the wait cannot be answered before W runs");
  await orch.call("task.transition", { taskId: "W", to: "running" });
  assert.equal((await wait).status, "running");
});

test("refusals: a wrong token fails the hello, a method of another role fails before it is sent", { timeout: 60_000 }, async (t) => {
  await assert.rejects(
    CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "admin", token: "not-the-token" } }),
    (err) => err instanceof BrokerError && err.code === "auth",
  );
  const { runId, orch, token } = await newRun(t);
  const worker = closing(t, await CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "worker", runId, taskId: "P", token } }));
  await assert.rejects(worker.call("run.create", { team: "t", goal: "g", cwd: "/" }), { code: "forbidden" });
  await assert.rejects(worker.call("no.such"), { code: "bad-method" });
  // The broker's own refusal comes back with the commandId the command was sent with.
  const err = await worker.call("delegate.request", { prompt: "" }).catch((e) => e);
  assert.equal(err.code, "bad-params");
  assert.match(err.commandId, /^[0-9a-f-]{36}$/);
});

test("a command whose answer is lost is sent again with its commandId and answers the recorded outcome, once", { timeout: 60_000 }, async (t) => {
  const { runId, orch, token } = await newRun(t);
  let lost = null;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    server(frame, session) {
      const req = session.requests.find((r) => r.id === frame.id);
      if (req?.method === "delegate.request" && lost === null) {
        lost = frame; // crewd decided it and answered; the client never sees the answer
        return "kill";
      }
    },
  }));
  const worker = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "worker", runId, taskId: "P", token } }));
  let reconnects = 0;
  worker.on("reconnect", () => reconnects++);

  const res = await worker.call("delegate.request", { prompt: "look around", budgetTokens: 0 });

  assert.ok(lost?.result, "the first attempt was decided");
  assert.deepEqual(res, lost.result, "the retry answers the recorded outcome");
  assert.equal(reconnects, 1);
  const sent = proxy.sessions.map((s) => s.requests.filter((r) => r.method === "delegate.request"));
  assert.equal(sent.length, 2, "two connections");
  assert.equal(sent[0].length, 1);
  assert.equal(sent[1].length, 1);
  assert.equal(sent[1][0].params.commandId, sent[0][0].params.commandId, "the retry reuses the commandId");
  const dels = await orch.call("query.delegations");
  assert.equal(dels.total, 1, "one admission, not two");
  assert.equal(dels.delegations[0].subId, res.grandchildTaskRef);

});

test("a subscription resumes from its last seq after a resync frame: no event skipped or repeated", { timeout: 60_000 }, async (t) => {
  const { runId, orch, token } = await newRun(t);
  let resynced = false;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    server(frame) {
      // Lose seq 5..7 on the way, then say so, as crewd does when a subscriber falls behind.
      if (frame.event === "team.event" && !resynced && frame.seq >= 5 && frame.seq <= 7) {
        if (frame.seq < 7) return "drop";
        resynced = true;
        return [{ event: "resync", data: { fromSeq: 5 } }];
      }
    },
  }));
  const worker = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "worker", runId, taskId: "P", token } }));
  const sub = worker.subscribe({ sinceSeq: 0 });
  for (const i of range(10)) await orch.call("msg.send", { to: "P", body: `m${i}` });
  const last = await headSeq(orch);
  assert.ok(last > 10);

  assert.deepEqual(await seqsUntil(sub, last), range(last));
  assert.ok(resynced);
  assert.equal(sub.resyncs, 1);
});

test("a subscription resumes after its connection is lost, a gap in seq is read again, a repeat is dropped", { timeout: 60_000 }, async (t) => {
  const { runId, orch, token } = await newRun(t);
  let gapMade = false;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    server(frame, session) {
      if (frame.event !== "team.event") return;
      if (session.n === 0 && frame.seq === 6) return "kill";
      // On the second connection, send seq 8 twice (delivered once), and lose seq 9 silently: the client sees 10
      // after 8 and reads from 8 again.
      if (session.n === 1 && frame.seq === 8 && !gapMade) return [frame, frame];
      if (session.n === 1 && frame.seq === 9 && !gapMade) {
        gapMade = true;
        return "drop";
      }
    },
  }));
  const worker = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "worker", runId, taskId: "P", token } }));
  const disconnects = [];
  worker.on("disconnect", (err) => disconnects.push(err.code));
  const sub = worker.subscribe();
  for (const i of range(10)) await orch.call("msg.send", { to: "P", body: `m${i}` });
  const last = await headSeq(orch);

  assert.deepEqual(await seqsUntil(sub, last), range(last));
  assert.deepEqual(disconnects, ["closed"]);
  assert.ok(gapMade);
  assert.ok(sub.resyncs >= 1);
});

test("after crewd is killed and restarted, calls and the subscription carry on with the same tokens", { timeout: 60_000 }, async (t) => {
  const { runId, orch, token } = await newRun(t);
  const worker = closing(t, await CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "worker", runId, taskId: "P", token } }));
  const sub = worker.subscribe();
  const before = await headSeq(orch);
  assert.deepEqual(await seqsUntil(sub, before), range(before));

  await d.stop("SIGKILL");
  await d.start();

  const sent = await orch.call("msg.send", { to: "P", body: "after the restart" });
  assert.equal(sent.recipientCount, 1);
  const last = await headSeq(orch);
  assert.ok(last > before);
  const seqs = await seqsUntil(sub, last);
  assert.deepEqual(seqs, range(last).slice(before));
});

test("a filtered subscription delivers a repeated frame once", { timeout: 60_000 }, async (t) => {
  const { runId, orch, token } = await newRun(t);
  let repeated = 0;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    server(frame) {
      if (frame.event === "team.event" && repeated === 0) {
        repeated = frame.seq;
        return [frame, frame];
      }
    },
  }));
  const worker = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "worker", runId, taskId: "P", token } }));
  const sub = worker.subscribe({ types: ["mailbox.appended"] });
  for (const i of range(3)) await orch.call("msg.send", { to: "P", body: `m${i}` });
  const types = [];
  const seqs = [];
  while (seqs.length < 3) {
    const { value } = await sub.next();
    types.push(value.type);
    seqs.push(value.metadata.seq);
  }
  assert.ok(repeated > 0);
  assert.deepEqual(types, ["mailbox.appended", "mailbox.appended", "mailbox.appended"]);
  assert.equal(new Set(seqs).size, 3, `no repeat in ${seqs}`);
});

test("an answer that never comes times out with its commandId, and a retry with it learns the outcome", { timeout: 60_000 }, async (t) => {
  const { runId, orch, token } = await newRun(t);
  let dropped = null;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    server(frame, session) {
      const req = session.requests.find((r) => r.id === frame.id);
      if (req?.method === "msg.send" && dropped === null) {
        dropped = frame; // decided, answered, and lost on the way; the connection stays
        return "drop";
      }
    },
  }));
  const worker = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "worker", runId, taskId: "P", token } }));
  const err = await worker.call("msg.send", { to: "parent", body: "once" }, { timeoutMs: 500 }).catch((e) => e);
  assert.equal(err.code, "timeout");
  assert.ok(dropped?.result);
  const again = await worker.call("msg.send", { to: "parent", body: "once" }, { commandId: err.commandId });
  assert.deepEqual(again, dropped.result);
  const inbox = await orch.call("query.mailbox", {});
  assert.equal(inbox.messages.filter((m) => m.body === JSON.stringify("once")).length, 1);
});

test("a checkpoint whose answer is lost is not made again: the call fails request-failed, and its copy is there", { timeout: 60_000 }, async (t) => {
  let lost = null;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    server(frame, session) {
      const req = session.requests.find((r) => r.id === frame.id);
      if (req?.method === "admin.checkpoint" && lost === null) {
        lost = frame; // the copy is written and answered; the client never sees the answer
        return "kill";
      }
    },
  }));
  const a = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "admin", token: d.adminToken } }));
  const dir = join(d.root, "checkpoint-lost");
  // Sent again, the request would be answered bad-params "dir exists": a failure for a copy that was made.
  const err = await a.call("admin.checkpoint", { dir }).catch((e) => e);
  assert.ok(lost?.result, "the first attempt was done");
  assert.equal(err.code, "request-failed");
  assert.equal(err.method, "admin.checkpoint");
  assert.ok(existsSync(dir));
  const sent = proxy.sessions.flatMap((s) => s.requests.filter((r) => r.method === "admin.checkpoint"));
  assert.equal(sent.length, 1, "sent once");
  assert.deepEqual(await a.call("ping"), { pong: true, protocol: 1 }, "the client carries on");
});

test("events.subscribe is subscribe()'s: a call of it is refused, and the subscription keeps its place on the wire", { timeout: 60_000 }, async (t) => {
  const { orch } = await newRun(t);
  const sub = orch.subscribe();
  const before = await headSeq(orch);
  assert.deepEqual(await seqsUntil(sub, before), range(before));
  // Sent, it would replace the subscription on the connection, and what it pushes has nowhere to go.
  await assert.rejects(orch.call("events.subscribe", { sinceSeq: 0, types: ["no.such.type"] }), { code: "bad-method" });
  await orch.call("msg.send", { to: "P", body: "after" });
  const last = await headSeq(orch);
  assert.deepEqual(await seqsUntil(sub, last), range(last).slice(before));
});

const waits = (proxy) => proxy.sessions.flatMap((s) => s.requests.filter((r) => r.method === "task.waitStatus"));

test("a waitStatus sent again after a lost connection waits only the time its caller has left", { timeout: 60_000 }, async (t) => {
  const { runId, orch, orchToken: token } = await newRun(t);
  const T = 60000;
  let firstAt = null;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    client(frame, session) {
      if (frame.method === "task.waitStatus" && session.n === 0) firstAt = performance.now();
    },
  }));
  const watcher = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "orchestrator", runId, token } }));
  const wait = watcher.call("task.waitStatus", { taskId: "P", until: "completed", timeoutMs: T });
  await watcher.call("ping"); // answered after the wait went through the proxy: the two are sent in order
  assert.ok(firstAt !== null);
  await sleep(20); // part of the caller's time is spent on the first connection
  const killedAt = performance.now();
  const reconnected = once(watcher, "reconnect");
  proxy.sessions[0].kill();
  await reconnected;
  await watcher.call("ping"); // the resent wait went before it

  const [first, resent] = waits(proxy);
  assert.equal(first.params.timeoutMs, T);
  // The caller started no later than the proxy saw the first request, and the resend was made no earlier than the
  // kill: at most T - (killedAt - firstAt) was left.
  assert.ok(resent.params.timeoutMs <= T - Math.floor(killedAt - firstAt),
    `resent with timeoutMs ${resent.params.timeoutMs} after ${killedAt - firstAt} ms of ${T}`);
  assert.ok(resent.params.timeoutMs > 0);
  await orch.call("task.transition", { taskId: "P", to: "completed" });
  assert.equal((await wait).status, "completed");
});

test("a waitStatus whose deadline passes while the connection is down fails wait-timeout then, and is not sent again", { timeout: 60_000 }, async (t) => {
  const { runId, orchToken: token } = await newRun(t);
  let failed = false;
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    client(frame, session) {
      // crewd never sees the first request, so only a resent one could be answered by crewd; and no hello is answered
      // until the call has failed, so the client stays disconnected past the caller's deadline.
      if (frame.method === "task.waitStatus" && session.n === 0) return "drop";
      if (frame.method === "hello" && session.n > 0 && !failed) return "drop";
    },
  }));
  const watcher = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "orchestrator", runId, token } }));
  let reconnects = 0;
  watcher.on("reconnect", () => reconnects++);
  const wait = watcher.call("task.waitStatus", { taskId: "P", until: "completed", timeoutMs: 300 }).catch((err) => {
    failed = true;
    return { err, reconnectsThen: reconnects };
  });
  await watcher.call("ping");
  proxy.sessions[0].kill();

  const { err, reconnectsThen } = await wait;
  assert.equal(err?.code, "wait-timeout");
  assert.equal(err.method, "task.waitStatus");
  assert.equal(reconnectsThen, 0, "it failed at its deadline, while the client was still connecting");
  await once(watcher, "reconnect");
  await watcher.call("ping");
  assert.equal(waits(proxy).length, 1, "not sent again after its deadline");
});

test("a terminal status reached while the wait's answer was lost answers the resent waitStatus at once", { timeout: 60_000 }, async (t) => {
  const { runId, orch, orchToken: token } = await newRun(t);
  const proxy = closing(t, await startProxy(d.socketPath, d.root, {
    client(frame, session) {
      if (frame.method === "task.waitStatus" && session.n === 0) return "drop"; // its answer never comes
    },
  }));
  const watcher = closing(t, await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "orchestrator", runId, token } }));
  const wait = watcher.call("task.waitStatus", { taskId: "Q", until: "failed", timeoutMs: 60000 });
  await watcher.call("ping");
  // The task ends while the call waits for an answer; the status it ends in is not left here, so the resent call,
  // whose status is read when it arrives, sees it: any terminal status answers a terminal until.
  await orch.call("task.transition", { taskId: "Q", to: "completed" });
  proxy.sessions[0].kill();

  const res = await wait;
  assert.equal(res.status, "completed");
  assert.equal(waits(proxy).length, 2);
});
