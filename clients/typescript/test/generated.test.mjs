// The client's method table and types are what docs/protocol.json generates, and every method the description
// lists is in the table: the Go server, the description and the client cannot disagree.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { generate, paths } from "../scripts/generate.mjs";
import { METHODS, ROLES } from "../src/index.js";

const desc = JSON.parse(readFileSync(paths.description, "utf8"));

test("src/protocol.js and src/protocol.d.ts are what docs/protocol.json generates", () => {
  const want = generate(desc);
  assert.equal(readFileSync(paths.js, "utf8"), want.js, "src/protocol.js is stale: run `go generate ./broker`");
  assert.equal(readFileSync(paths.dts, "utf8"), want.dts, "src/protocol.d.ts is stale: run `go generate ./broker`");
});

test("every method and role of the description is in the client's table", () => {
  assert.deepEqual(Object.keys(METHODS).sort(), desc.methods.map((m) => m.name).sort());
  assert.deepEqual([...ROLES], desc.roles);
  for (const m of desc.methods) {
    assert.deepEqual([...METHODS[m.name].roles], m.roles, m.name);
    assert.equal(METHODS[m.name].command, m.command, m.name);
    if (m.command) assert.ok(m.params.some((p) => p.name === "commandId"), `${m.name} takes a commandId`);
  }
});

test("a length bound in the declarations names its unit", () => {
  const dts = readFileSync(paths.dts, "utf8");
  const bounds = dts.match(/length \d+\.\.[\d∞]+( code points)?/g) ?? [];
  assert.ok(bounds.length > 0, "the declarations document length bounds");
  for (const b of bounds) assert.match(b, / code points$/, `"${b}": lengths count code points (docs/protocol.md, Lengths)`);
});
