// model.js: pure functions that shape API answers into what the views draw
// (no DOM, no fetch), so node --test checks them.

import { parseTime, isTerminalDelegation } from './format.js';

const terminalTypes = {
  'delegate.completed': 'completed',
  'delegate.failed': 'failed',
  'delegate.timed_out': 'timed out',
  'delegate.cancelled': 'cancelled',
};

/**
 * delegationTimeline folds a run's events (TeamEvents, in position order)
 * into one entry per delegation request: requested → admitted | rejected →
 * spawned → completed | failed | timed out | cancelled, each step with its
 * time, position and event. A rejection decided before a subId existed
 * (nesting-disabled) is its own entry, keyed by its position.
 *
 * Entry: {key, subId, parent, role, steps: [{name, type, at, position, event}],
 *         outcome: 'pending'|'admitted'|'rejected'|'running'|terminal name,
 *         reason?, message?, policy?, rejectedPosition?, reservedPosition?, chargedPosition?}
 */
export function delegationTimeline(events) {
  const bySub = new Map();
  const entries = [];
  const entry = (key, ev) => {
    let e = bySub.get(key);
    if (!e) {
      const d = ev.data || {};
      e = { key, subId: d.subId || '', parent: d.taskId || ev.taskId || '', role: d.role || '', steps: [], outcome: 'pending' };
      bySub.set(key, e);
      entries.push(e);
    }
    return e;
  };
  for (const ev of events) {
    const d = ev.data || {};
    const step = (e, name) => e.steps.push({ name, type: ev.type, at: parseTime(ev.time), position: ev.metadata.position, event: ev });
    switch (ev.type) {
      case 'delegate.requested': {
        const e = entry(d.subId, ev);
        step(e, 'requested');
        break;
      }
      case 'delegate.admitted': {
        const e = entry(d.subId, ev);
        if (d.role) e.role = d.role;
        e.outcome = 'admitted';
        e.depth = d.childDepth;
        e.model = d.model;
        e.reserved = d.reservedTokens || 0;
        e.metered = !d.unmetered;
        e.deadline = d.deadline;
        e.admittedPosition = ev.metadata.position;
        e.policy = d.policy;
        step(e, 'admitted');
        break;
      }
      case 'delegate.rejected': {
        const e = entry(d.subId || `@${ev.metadata.position}`, ev);
        e.outcome = 'rejected';
        e.reason = d.reason;
        e.message = d.message;
        e.policy = d.policy;
        e.rejectedPosition = ev.metadata.position;
        step(e, 'rejected');
        break;
      }
      case 'delegate.spawned': {
        const e = bySub.get(d.subId);
        if (!e) break;
        if (e.outcome === 'admitted') e.outcome = 'running';
        step(e, 'spawned');
        break;
      }
      case 'delegate.cancel_requested': {
        const e = bySub.get(d.subId);
        if (e) step(e, 'cancel requested');
        break;
      }
      case 'budget.reserved': {
        const e = bySub.get(d.subId);
        if (e) e.reservedPosition = ev.metadata.position;
        break;
      }
      case 'budget.charged': {
        const e = bySub.get(d.subId);
        if (e) e.chargedPosition = ev.metadata.position;
        break;
      }
      default: {
        const name = terminalTypes[ev.type];
        const e = name && bySub.get(d.subId);
        if (!e) break;
        e.outcome = name;
        e.expired = !!d.expired;
        e.usageTokens = d.usageTokens;
        step(e, name);
      }
    }
  }
  for (const e of entries) {
    for (let i = 0; i < e.steps.length; i++) {
      e.steps[i].sincePrev = i === 0 ? 0 : e.steps[i].at - e.steps[i - 1].at;
    }
    const first = e.steps[0];
    const last = e.steps[e.steps.length - 1];
    e.at = first ? first.at : 0;
    e.total = first && last ? last.at - first.at : 0;
  }
  return entries;
}

/**
 * taskTree nests a run's tasks: workflow tasks are roots and each
 * delegation's shadow task (id = subId) is a child of its parent task, so a
 * grandchild that delegated further nests once more. Rejected requests from
 * the timeline appear as leaves under their parent. Nodes whose parent is
 * unknown (a cut list) become roots. Order: creation order.
 *
 * Node: {id, task?, delegation?, rejection?, children: []}
 */
export function taskTree(tasks, delegations, timeline = []) {
  const nodes = new Map();
  const roots = [];
  const delegationOf = new Map(delegations.map((d) => [d.subId, d]));
  for (const t of tasks) nodes.set(t.id, { id: t.id, task: t, delegation: delegationOf.get(t.id), children: [] });
  // Delegations whose shadow task is not in the list (a truncated page) still show.
  for (const d of delegations) {
    if (!nodes.has(d.subId)) nodes.set(d.subId, { id: d.subId, delegation: d, children: [] });
  }
  for (const n of nodes.values()) {
    const parentId = n.delegation ? n.delegation.parentTaskId : null;
    const parent = parentId && nodes.get(parentId);
    if (parent && parent !== n) parent.children.push(n);
    else roots.push(n);
  }
  for (const e of timeline) {
    if (e.outcome !== 'rejected') continue;
    const parent = nodes.get(e.parent);
    const leaf = { id: e.subId || e.key, rejection: e, children: [] };
    if (parent) parent.children.push(leaf);
    else roots.push(leaf);
  }
  return roots;
}

/** inFlight reports whether a delegation still holds its slot. */
export const inFlight = (d) => !isTerminalDelegation(d.status);

/**
 * health lists what needs a look: running runs with no event for staleMs,
 * in-flight delegations past their deadline, and credentials not revoked on
 * a terminal task. Each item: {kind, runId, what, since}.
 */
export function healthItems({ runs = [], delegations = [], credentials = [] }, now, staleMs) {
  const items = [];
  for (const r of runs) {
    if (r.status === 'running' && r.updatedAt && now - r.updatedAt > staleMs) {
      items.push({ kind: 'quiet run', runId: r.runId, what: `running with no event for`, since: r.updatedAt });
    }
  }
  for (const d of delegations) {
    if (inFlight(d) && d.deadline && d.deadline < now) {
      items.push({ kind: 'overdue delegation', runId: d.runId, subId: d.subId, what: `${d.subId} (${d.status}) past its deadline by`, since: d.deadline });
    }
  }
  for (const c of credentials) {
    if (!c.revoked && c.taskStatus && ['completed', 'failed', 'cancelled', 'skipped'].includes(c.taskStatus)) {
      items.push({ kind: 'live credential', runId: c.runId, what: `credential of ${c.key} still valid; the task is ${c.taskStatus}`, since: c.issuedAt });
    }
  }
  return items;
}

/** groupBy groups items by key(item), keeping first-seen order of the keys. */
export function groupBy(items, key) {
  const m = new Map();
  for (const it of items) {
    const k = key(it);
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(it);
  }
  return m;
}

/**
 * nearestIndex is the index of the last position ≤ pos in a sorted array of
 * positions (0 when pos is before all of them): the slider's stop for a position.
 */
export function nearestIndex(positions, pos) {
  let lo = 0;
  let hi = positions.length - 1;
  let best = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (positions[mid] <= pos) {
      best = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return best;
}
