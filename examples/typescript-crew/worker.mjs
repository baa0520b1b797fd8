#!/usr/bin/env node
// A worker standing in for an agent: it delegates part of its task to a grandchild, asks the orchestrator a
// question and parks until the answer, follows the steer it is sent, reads the grandchild's result from its
// mailbox, reports to the run inbox, and prints its usage (JSON) for the orchestrator to record.
import { CrewClient } from "../../clients/typescript/src/index.js";

const { CREW_SOCKET: socketPath, CREW_RUN_ID: runId, CREW_TASK_ID: taskId, CREW_TOKEN: token } = process.env;
const log = (...a) => console.error(`[${taskId}]`, ...a);

const client = await CrewClient.connect({ socketPath, credentials: { role: "worker", runId, taskId, token } });
const mail = new Mailbox(client);

const { grandchildTaskRef } = await client.call("delegate.request", {
  prompt: `list the files of ${taskId}`, description: "survey", role: "explorer", budgetTokens: 2000, timeoutSec: 120,
});
log(`delegated ${grandchildTaskRef}`);

const ask = await client.call("wait.request", { question: "Start with the tests or the code?", options: ["tests", "code"], timeoutSec: 60 });
const answer = await mail.take((m) => m.kind === "response" && m.questionId === ask.questionId);
const choice = JSON.parse(answer.body); // msg.send stores a body as its JSON text, as pi-crew does
log(`answer: ${choice}`);
await client.call("wait.resolve", { questionId: ask.questionId });

const steer = await mail.take((m) => m.kind === "steer");
log(`steered: ${steer.body}`);
const result = await mail.take((m) => m.from === `delegate:${grandchildTaskRef}`);
log(`grandchild result: ${result.body.split("\n").length} lines`);

await client.call("msg.send", { to: "parent", kind: "notify", body: { task: taskId, started: choice, done: true } });
await client.call("mailbox.ack", { messageIds: mail.seen });
await client.close();
console.log(JSON.stringify({ input: 1200, output: 300, turns: 3 }));

// Mailbox collects the worker's messages from pushes, and from msg.inbox after a reconnect (pushes are best effort).
function Mailbox(c) {
  const messages = [];
  const seen = [];
  let wake = () => {};
  const add = (m) => {
    if (messages.some((x) => x.id === m.id) || seen.includes(m.id)) return;
    messages.push(m);
    wake();
  };
  const readInbox = async () => (await c.call("msg.inbox", {})).messages.forEach(add);
  c.on("mailbox", add);
  c.on("reconnect", () => readInbox().catch(() => {}));
  readInbox().catch(() => {});
  return {
    seen,
    async take(match) {
      for (;;) {
        const i = messages.findIndex(match);
        if (i >= 0) {
          const [m] = messages.splice(i, 1);
          seen.push(m.id);
          return m;
        }
        await new Promise((resolve) => (wake = resolve));
      }
    },
  };
}
