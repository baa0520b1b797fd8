// Unit tests of static/js/model.js, run by TestJavaScriptUnits (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { delegationTimeline, taskTree, healthItems, nearestIndex, groupBy } from '../static/js/model.js';

let pos = 0;
const ev = (type, data, ms) => ({ type, runId: 'R', taskId: data.taskId, time: new Date(ms).toISOString(), data, metadata: { position: ++pos } });

function crewEvents() {
  pos = 0;
  return [
    ev('delegate.requested', { taskId: 'P', subId: 'gc-1', role: 'explorer' }, 1000),
    ev('delegate.admitted', { taskId: 'P', subId: 'gc-1', childDepth: 2, role: 'explorer', reservedTokens: 50, deadline: 901000 }, 1000),
    ev('budget.reserved', { taskId: 'P', subId: 'gc-1', tokens: 50, grantedTokens: 1000 }, 1000),
    ev('delegate.requested', { taskId: 'P', subId: 'gc-2', role: 'explorer' }, 2000),
    ev('delegate.rejected', { taskId: 'P', subId: 'gc-2', reason: 'slots-exhausted', policy: { held: 1, capacity: 1 } }, 2000),
    ev('delegate.spawned', { taskId: 'P', subId: 'gc-1', pid: 7 }, 3500),
    ev('delegate.timed_out', { taskId: 'P', subId: 'gc-1', expired: true }, 933000),
    ev('delegate.rejected', { taskId: 'Q', reason: 'nesting-disabled' }, 934000),
  ];
}

test('delegationTimeline follows each request to its outcome with durations', () => {
  const tl = delegationTimeline(crewEvents());
  assert.equal(tl.length, 3);
  const [a, b, c] = tl;
  assert.equal(a.subId, 'gc-1');
  assert.deepEqual(a.steps.map((s) => s.name), ['requested', 'admitted', 'spawned', 'timed out']);
  assert.deepEqual(a.steps.map((s) => s.sincePrev), [0, 0, 2500, 929500]);
  assert.equal(a.outcome, 'timed out');
  assert.equal(a.expired, true);
  assert.equal(a.reservedPosition, 3);
  assert.equal(a.total, 932000);
  assert.equal(b.outcome, 'rejected');
  assert.equal(b.reason, 'slots-exhausted');
  assert.equal(b.rejectedPosition, 5);
  assert.deepEqual(b.policy, { held: 1, capacity: 1 });
  assert.equal(c.key, '@8', 'a rejection before a subId existed is keyed by its position');
  assert.equal(c.parent, 'Q');
});

test('delegationTimeline ignores lifecycle events of unknown delegations', () => {
  pos = 0;
  const tl = delegationTimeline([ev('delegate.spawned', { subId: 'gc-x', pid: 1 }, 1), ev('delegate.completed', { subId: 'gc-x' }, 2)]);
  assert.deepEqual(tl, []);
});

test('taskTree nests shadow tasks under their parent, and rejections as leaves', () => {
  const tasks = [{ id: 'P', kind: 'workflow' }, { id: 'gc-1', kind: 'shadow' }, { id: 'gc-3', kind: 'shadow' }, { id: 'Q', kind: 'workflow' }];
  const delegations = [{ subId: 'gc-1', parentTaskId: 'P', status: 'running' }, { subId: 'gc-3', parentTaskId: 'gc-1', status: 'queued' },
    { subId: 'gc-9', parentTaskId: 'Q', status: 'queued' }];
  const roots = taskTree(tasks, delegations, delegationTimeline(crewEvents()));
  assert.deepEqual(roots.map((n) => n.id), ['P', 'Q']);
  const [p, q] = roots;
  assert.deepEqual(p.children.map((n) => n.id), ['gc-1', 'gc-2']);
  assert.equal(p.children[1].rejection.reason, 'slots-exhausted');
  assert.deepEqual(p.children[0].children.map((n) => n.id), ['gc-3'], 'a grandchild that delegated nests once more');
  assert.deepEqual(q.children.map((n) => n.id), ['gc-9', '@8'], 'a delegation missing from the task page still shows');
});

test('healthItems flags quiet runs, overdue delegations and live credentials on terminal tasks', () => {
  const now = 1_000_000;
  const items = healthItems({
    runs: [{ runId: 'A', status: 'running', updatedAt: now - 10 * 60_000 }, { runId: 'B', status: 'running', updatedAt: now - 1000 },
      { runId: 'C', status: 'blocked', updatedAt: 0 }],
    delegations: [{ runId: 'A', subId: 'gc-1', status: 'running', deadline: now - 1 }, { runId: 'A', subId: 'gc-2', status: 'completed', deadline: now - 1 },
      { runId: 'A', subId: 'gc-3', status: 'queued', deadline: now + 1 }],
    credentials: [{ runId: 'A', key: 'T1', revoked: false, taskStatus: 'completed' }, { runId: 'A', key: 'T2', revoked: true, taskStatus: 'failed' },
      { runId: 'A', key: 'orchestrator', revoked: false }],
  }, now, 5 * 60_000);
  assert.deepEqual(items.map((i) => [i.kind, i.runId]), [['quiet run', 'A'], ['overdue delegation', 'A'], ['live credential', 'A']]);
});

test('nearestIndex finds the last position at or before', () => {
  const p = [3, 7, 9, 20];
  assert.equal(nearestIndex(p, 9), 2);
  assert.equal(nearestIndex(p, 10), 2);
  assert.equal(nearestIndex(p, 1), 0);
  assert.equal(nearestIndex(p, 99), 3);
});

test('groupBy keeps first-seen key order', () => {
  assert.deepEqual([...groupBy([1, 2, 3, 4], (n) => (n % 2 ? 'odd' : 'even')).keys()], ['odd', 'even']);
});
