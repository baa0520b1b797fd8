// Runs the example crew against a real crewd (built by the test) and checks what it left in the log, so the example
// keeps working as the protocol changes.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { CrewClient } from "../../clients/typescript/src/index.js";
import { crewdBinary, crewFlags, startCrewd } from "../../clients/typescript/test/_crewd.mjs";

const here = dirname(fileURLToPath(import.meta.url));

test("the example crew runs to completion: delegations settled with usage, asks answered, workers steered", { timeout: 120_000 }, async (t) => {
  const d = await startCrewd();
  t.after(() => d.close());
  const { stdout } = await promisify(execFile)(process.execPath, [
    join(here, "crew.mjs"), "--socket", d.socketPath, "--data", d.dataDir, "--run-id", "example",
  ]);
  assert.match(stdout, /run example completed/);

  const admin = await CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "admin", token: d.adminToken } });
  t.after(() => admin.close());
  const run = await admin.call("query.run", { runId: "example" });
  assert.equal(run.status, "completed");
  const tasks = (await admin.call("query.tasks", { runId: "example" })).tasks;
  const status = Object.fromEntries(tasks.map((x) => [x.id, x.status]));
  assert.equal(status.W1, "completed");
  assert.equal(status.W2, "completed");
  const dels = (await admin.call("query.delegations", { runId: "example" })).delegations;
  assert.equal(dels.length, 2);
  for (const del of dels) assert.equal(del.status, "completed");

  const types = [];
  let since = 0;
  for (;;) {
    const page = await admin.call("events.since", { runId: "example", sinceSeq: since });
    types.push(...page.events.map((e) => e.type));
    since = page.nextSeq;
    if (!page.hasMore) break;
  }
  const count = (type) => types.filter((x) => x === type).length;
  assert.equal(count("delegate.admitted"), 2);
  assert.equal(count("delegate.spawned"), 2);
  assert.equal(count("delegate.completed"), 2);
  assert.equal(count("budget.charged"), 2, "usage above the reservation is charged");
  assert.equal(count("steer.pushed"), 2);
  assert.equal(count("ask.requested"), 2);
  assert.equal(count("ask.answered"), 2);
  assert.equal(count("task.usage"), 2);
  assert.equal(types.at(-1), "run.completed");
});

// Without --wait-methods each worker's ask is refused and the worker exits 1 after its delegation was admitted: the
// crew fails. Failing, it must give back what it took — the daemon-wide slots of its delegations (else the next crew
// is refused for up to their timeout) and the processes it started.
test("a crew that fails settles its delegations in flight, so their slots are free, and no grandchild process of theirs is left", { timeout: 120_000 }, async (t) => {
  const d = await startCrewd(crewFlags.filter((f) => f !== "--wait-methods"));
  t.after(() => d.close());
  const failed = await promisify(execFile)(process.execPath, [
    join(here, "crew.mjs"), "--socket", d.socketPath, "--data", d.dataDir, "--run-id", "failing",
  ]).then(() => null, (err) => err);
  assert.equal(failed?.code, 1, "the crew fails");

  const admin = await CrewClient.connect({ socketPath: d.socketPath, credentials: { role: "admin", token: d.adminToken } });
  t.after(() => admin.close());
  assert.equal((await admin.call("query.run", { runId: "failing" })).status, "failed");
  const dels = (await admin.call("query.delegations", { runId: "failing" })).delegations;
  assert.ok(dels.length > 0, "the workers delegated before they failed");
  for (const del of dels) {
    assert.notEqual(del.settledAt, undefined, `${del.subId} is settled (${del.status})`);
    if (del.pid !== undefined) assert.throws(() => process.kill(del.pid, 0), { code: "ESRCH" }, `${del.subId}'s process ${del.pid} is gone`);
  }
  assert.equal((await admin.call("query.slots")).held, 0, "no slot is held for the failed crew");
});

// Run as its README says, without --socket and --data, the crew finds crewd where crewd put its socket and data:
// crewd reads XDG_RUNTIME_DIR and XDG_DATA_HOME only when absolute, as the XDG base directory spec says, and TMPDIR
// (else /tmp, never TMP) and HOME likewise.
test("without --socket and --data the crew finds crewd's defaults, relative XDG directories ignored as crewd ignores them", { timeout: 120_000 }, async (t) => {
  const root = mkdtempSync(join(tmpdir(), "crew-defaults-"));
  mkdirSync(join(root, "home"));
  mkdirSync(join(root, "cwd"));
  const env = { ...process.env, HOME: join(root, "home"), TMPDIR: root, XDG_RUNTIME_DIR: "run", XDG_DATA_HOME: "data" };
  const crewd = spawn(await crewdBinary(), ["--http", "", "--min-free-mib", "0", ...crewFlags], { env, cwd: join(root, "cwd"), stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise((resolve) => crewd.once("exit", resolve));
  t.after(async () => {
    crewd.kill();
    await exited;
    rmSync(root, { recursive: true, force: true });
  });
  let stderr = "";
  crewd.stderr.setEncoding("utf8").on("data", (s) => (stderr += s));
  await new Promise((resolve, reject) => {
    createInterface({ input: crewd.stdout }).on("line", (line) => line.startsWith("crewd: socket ") && resolve());
    exited.then((code) => reject(new Error(`crewd exited ${code}:\n${stderr}`)));
  });

  const { stdout } = await promisify(execFile)(process.execPath, [join(here, "crew.mjs"), "--run-id", "defaults"], { env, cwd: join(root, "cwd") });
  assert.match(stdout, /run defaults completed/);
});
