#!/usr/bin/env node
// A grandchild standing in for a delegated agent: it tells the run it started, does its (pretend) work and prints
// its result and token usage (JSON) for the orchestrator to settle the delegation with.
import { CrewClient } from "../../clients/typescript/src/index.js";

const { CREW_SOCKET: socketPath, CREW_RUN_ID: runId, CREW_TASK_ID: subId, CREW_TOKEN: token } = process.env;
const client = await CrewClient.connect({ socketPath, credentials: { role: "worker", runId, taskId: subId, token } });
await client.call("msg.send", { to: "parent", kind: "notify", body: `${subId} started` });
await client.close();
console.log(JSON.stringify({ text: "found: README.md\nfound: main.go\nfound: main_test.go", usageTokens: 2500 }));
