// A subscriber that stops reading makes crewd's outbound queue overflow: crewd sends a real resync frame and stops
// the subscription, and the client subscribes again from its last seq without losing or repeating an event.
import assert from "node:assert/strict";
import { test } from "node:test";

import { CrewClient } from "../src/index.js";
import { crewFlags, startCrewd } from "./_crewd.mjs";
import { startProxy } from "./_proxy.mjs";

test("after crewd overflows a subscriber's queue, the subscription resumes from its last seq", { timeout: 120_000 }, async (t) => {
  const d = await startCrewd([...crewFlags, "--outbound-queue-cap=32"]);
  t.after(() => d.close());
  const admin = await CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "admin", token: d.adminToken } });
  t.after(() => admin.close());
  const run = await admin.call("run.create", { runId: "R", team: "t", goal: "g", cwd: "/w" });
  const orch = await CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "orchestrator", runId: "R", token: run.orchestratorToken } });
  t.after(() => orch.close());

  let resyncFrames = 0;
  const proxy = await startProxy(d.socketPath, d.root, {
    server(frame) {
      if (frame.event === "resync") resyncFrames++;
    },
  });
  t.after(() => proxy.close());
  const watcher = await CrewClient.connect({ socketPath: proxy.path, credentials: { role: "orchestrator", runId: "R", token: run.orchestratorToken } });
  t.after(() => watcher.close());
  const sub = watcher.subscribe();
  const first = await sub.next();
  assert.equal(first.value.metadata.seq, 1);

  // The watcher's connection stops reading while the run grows by far more than the socket buffers and the
  // 32-frame queue hold; then it reads again.
  proxy.sessions[0].pause();
  const body = "x".repeat(2000);
  for (let i = 0; i < 10; i++) {
    await Promise.all(Array.from({ length: 100 }, () => orch.call("msg.send", { to: "parent", body })));
  }
  const last = (await orch.call("query.run")).usage.events;
  proxy.sessions[0].resume();

  const seqs = [1];
  while (seqs.at(-1) < last) {
    const { value, done } = await sub.next();
    assert.equal(done, false);
    seqs.push(value.metadata.seq);
  }
  assert.ok(resyncFrames >= 1, "crewd sent a resync frame");
  assert.ok(sub.resyncs >= 1);
  assert.deepEqual(seqs, Array.from({ length: last }, (_, i) => i + 1));
});
