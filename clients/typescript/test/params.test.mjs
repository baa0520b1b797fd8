// A call's params are one JSON object, as every method of the broker reads them: anything else is refused with a
// TypeError before anything is sent, where an engine command's params were spread into an object of their own.
import assert from "node:assert/strict";
import { test } from "node:test";

import { CrewClient } from "../src/index.js";
import { serveRequests } from "./_fakebroker.mjs";

test("params that are no object are refused with a TypeError, nothing sent; absent and null are no params", { timeout: 10_000 }, async (t) => {
  const sent = [];
  const path = await serveRequests(t, (req, send) => {
    sent.push(req);
    send({ id: req.id, result: { ok: true } });
  });
  const c = await CrewClient.connect({ socketPath: path, credentials: { role: "orchestrator", runId: "R", token: "x" } });
  t.after(() => c.close());
  const notObjects = { string: "abc", number: 7, boolean: true, array: ["a", "b"], bigint: 1n, function: () => ({}) };
  // An engine command (whose commandId the client adds), a read, and ping, whose params the broker does not read.
  for (const method of ["task.create", "query.tasks", "ping"]) {
    for (const [kind, params] of Object.entries(notObjects)) {
      await assert.rejects(c.call(method, params), (err) => {
        assert.ok(err instanceof TypeError, `${method} with ${kind} params: ${err}`);
        assert.match(err.message, new RegExp(`^${method.replace(".", "\\.")}: params must be an object`));
        return true;
      });
    }
  }
  await c.call("ping"); // the connection's requests are answered in order: every one before it has arrived
  assert.deepEqual(sent.map((req) => [req.method, req.params]), [["ping", {}]], "nothing but the last ping was sent");

  sent.length = 0;
  await c.call("query.tasks", null);
  await c.call("run.transition", undefined, { commandId: "c1" });
  await c.call("run.transition", Object.create(null, { to: { value: "running", enumerable: true } }), { commandId: "c2" });
  assert.deepEqual(sent.map((req) => [req.method, req.params]), [
    ["query.tasks", {}],
    ["run.transition", { commandId: "c1" }],
    ["run.transition", { to: "running", commandId: "c2" }],
  ]);
});
