#!/usr/bin/env node
// A small crew on crewlog, using only the TypeScript client: this orchestrator creates a run and two tasks, spawns
// a worker process per task (plain node scripts standing in for agents), and follows the run's events. Each worker
// delegates to a grandchild; the orchestrator spawns the grandchild when crewd admits it, reports the process and
// settles it with its usage, steers the worker, and answers the question the worker asks. Then it reports each
// worker's usage, completes the tasks and the run.
//
//   go run ./cmd/crewd --nesting --max-depth=3 --wait-methods      # terminal 1
//   node examples/typescript-crew/crew.mjs                          # terminal 2
//
// Options: --socket PATH and --data DIR (default: crewd's defaults), --run-id ID, --timeout-sec N.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { homedir, userInfo } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { CrewClient } from "../../clients/typescript/src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const { values: opts } = parseArgs({
  options: {
    socket: { type: "string", default: defaultSocket() },
    data: { type: "string", default: defaultData() },
    "run-id": { type: "string" },
    "timeout-sec": { type: "string", default: "60" },
  },
});
const log = (...a) => console.log("[orchestrator]", ...a);

const adminToken = readFileSync(join(opts.data, "admin.token"), "utf8").trim();
const admin = await CrewClient.connect({ socketPath: opts.socket, credentials: { role: "admin", token: adminToken } });
const run = await admin.call("run.create", {
  ...(opts["run-id"] ? { runId: opts["run-id"] } : {}),
  team: "example", goal: "show crewlog as a coordination store", cwd: process.cwd(), budgetTotal: 50_000,
});
await admin.close();
const runId = run.runId;
log(`run ${runId} created`);

const orch = await CrewClient.connect({
  socketPath: opts.socket,
  credentials: { role: "orchestrator", runId, token: run.orchestratorToken },
});
orch.on("mailbox", (m) => log(`inbox: ${m.from}: ${m.body}`));
const sub = orch.subscribe({ sinceSeq: 0 });
await orch.call("run.transition", { to: "running" });

const workers = ["W1", "W2"];
const work = new Set(); // grandchildren and replies in flight
const children = new Map(); // the processes this orchestrator started that have not exited → their exit
let stopping = false; // the crew failed: nothing more is started
const track = (p) => {
  work.add(p);
  p.finally(() => work.delete(p)).catch(() => {});
  return p;
};

// Follow the run: spawn what crewd admits, steer the worker that delegated, answer what workers ask.
const following = (async () => {
  for await (const ev of sub) {
    if (stopping) break; // events the subscription still holds after it was closed
    if (ev.type === "delegate.admitted") {
      log(`${ev.taskId} delegated ${ev.data.subId} (depth ${ev.data.childDepth}, reserved ${ev.data.reservedTokens ?? 0})`);
      track(runGrandchild(ev.data.subId));
      track(orch.call("steer.push", { taskId: ev.taskId, body: "keep the report to one line" }));
    } else if (ev.type === "ask.requested") {
      log(`${ev.data.taskId} asks: ${ev.data.question}`);
      const body = ev.data.options?.[0] ?? "yes";
      track(orch.call("msg.send", { to: ev.data.taskId, kind: "response", questionId: ev.data.questionId, body }));
    }
  }
})();

const crew = (async () => {
  const runs = [];
  for (const taskId of workers) {
    await orch.call("task.create", { taskId, role: "executor", agent: "node-worker", title: `part ${taskId}`, cwd: process.cwd() });
    const { token } = await orch.call("credential.issue", { taskId });
    await orch.call("task.transition", { taskId, to: "running" });
    runs.push(runWorker(taskId, token));
  }
  await Promise.all(runs);
  while (work.size > 0) await Promise.all([...work]);
})();

let timer;
const timeout = new Promise((_, reject) => {
  timer = setTimeout(() => reject(new Error(`the crew did not finish within ${opts["timeout-sec"]} s`)), Number(opts["timeout-sec"]) * 1000);
});
try {
  await Promise.race([crew, following.then(() => Promise.reject(new Error("the subscription ended"))), timeout]);
} catch (err) {
  console.error("[orchestrator] failed:", err);
  stopping = true;
  sub.close();
  // The failed run ends its workers' credentials and asks each delegation in flight to cancel; as its runtime, the
  // orchestrator then stops the processes it started and settles those delegations cancelled, which frees their
  // slots — daemon-wide — now rather than at their deadlines.
  await orch.call("run.transition", { to: "failed", reason: String(err.message ?? err) }).catch(() => {});
  await stopChildren();
  await settleInFlight().catch((e) => console.error("[orchestrator] settling the delegations in flight:", e));
  await orch.close();
  process.exit(1);
} finally {
  clearTimeout(timer);
}
sub.close();
await following;
await orch.call("run.transition", { to: "completed", summary: "both parts done" });
const dels = await orch.call("query.delegations");
const ledger = await orch.call("query.ledger");
log(`delegations: ${dels.delegations.map((d) => `${d.subId} ${d.status}`).join(", ")}`);
log(`ledger: ${ledger.accounts.map((a) => `${a.taskId} spent ${a.tokensSpent}/${a.tokensGranted}`).join(", ")}`);
log(`run ${runId} completed`);
await orch.close();

// runWorker spawns a worker for taskId and, once it exits, reports its usage and completes its task.
async function runWorker(taskId, token) {
  const out = await spawnNode("worker.mjs", { CREW_SOCKET: opts.socket, CREW_RUN_ID: runId, CREW_TASK_ID: taskId, CREW_TOKEN: token });
  const usage = JSON.parse(out);
  await orch.call("task.usage", { taskId, input: usage.input, output: usage.output, cacheRead: 0, cacheWrite: 0, turns: usage.turns });
  await orch.call("task.transition", { taskId, to: "completed" });
  log(`${taskId} completed`);
}

// runGrandchild gives an admitted delegation a credential and a process, reports the process, and settles it with
// the text and usage the grandchild printed.
async function runGrandchild(subId) {
  const { token } = await orch.call("credential.issue", { taskId: subId });
  const child = startNode("grandchild.mjs", { CREW_SOCKET: opts.socket, CREW_RUN_ID: runId, CREW_TASK_ID: subId, CREW_TOKEN: token });
  await orch.call("delegate.spawned", { subId, pid: child.pid });
  try {
    const result = JSON.parse(await child.output);
    await orch.call("delegate.settle", { subId, outcome: "ok", text: result.text, usageTokens: result.usageTokens });
  } catch (err) {
    // A crew that is stopping kills its grandchildren and settles them cancelled itself.
    if (!stopping) await orch.call("delegate.settle", { subId, outcome: "failed", text: String(err.message ?? err) });
    throw err;
  }
}

function startNode(script, env) {
  if (stopping) throw new Error(`${script}: the crew is stopping`);
  const child = spawn(process.execPath, [join(here, script)], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (s) => (out += s));
  const output = new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => (code === 0 ? resolve(out) : reject(new Error(`${script} exited ${code ?? signal}`))));
  });
  children.set(child, new Promise((resolve) => {
    const gone = () => {
      children.delete(child);
      resolve();
    };
    child.once("close", gone);
    child.once("error", gone); // a process that could not be started sends no close
  }));
  return { pid: child.pid, output };
}

// stopChildren ends every process the crew started and still runs (SIGTERM, SIGKILL after 5 s) and waits for them.
async function stopChildren() {
  await Promise.all([...children].map(([child, gone]) => {
    child.kill("SIGTERM");
    const kill = setTimeout(() => child.kill("SIGKILL"), 5000);
    return gone.finally(() => clearTimeout(kill));
  }));
}

// settleInFlight settles cancelled every delegation of the run not settled yet, admitted ones whose grandchild was
// never started included.
async function settleInFlight() {
  const open = [];
  let cursor;
  do {
    const page = await orch.call("query.delegations", cursor === undefined ? {} : { cursor });
    open.push(...page.delegations.filter((del) => del.settledAt === undefined));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  // NB: each on its own: one settled meanwhile (its grandchild ended as the crew failed) is refused, and must not
  // leave the ones after it holding their slots.
  for (const del of open) {
    try {
      await orch.call("delegate.settle", { subId: del.subId, outcome: "cancelled", text: "the crew failed" });
      log(`${del.subId} settled cancelled`);
    } catch (err) {
      console.error(`${del.subId}: not settled: ${err.message}`);
    }
  }
}

function spawnNode(script, env) {
  return startNode(script, env).output;
}

// defaultSocket and defaultData are crewd's defaults, read as crewd reads them: an XDG directory only when absolute
// (as the XDG base directory spec says), TMPDIR only when absolute and else /tmp (never TMP or TEMP, which node's
// tmpdir() would read), so that the crew finds the crewd its README starts. A relative HOME, where crewd has no
// default data directory and must be given --data, falls back to node's homedir().
function defaultSocket() {
  const { XDG_RUNTIME_DIR: runtime, TMPDIR: tmp } = process.env;
  if (absolute(runtime)) return join(runtime, "crewlog", "crewd.sock");
  return join(absolute(tmp) ? tmp : "/tmp", `crewlog-${userInfo().uid}`, "crewd.sock");
}

function defaultData() {
  const { XDG_DATA_HOME: data, HOME: home } = process.env;
  if (absolute(data)) return join(data, "crewlog");
  return join(absolute(home) ? home : homedir(), ".local", "share", "crewlog");
}

function absolute(dir) {
  return typeof dir === "string" && isAbsolute(dir);
}
