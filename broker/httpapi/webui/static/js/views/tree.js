// views/tree.js: the task tree: workflow tasks with their delegations (shadow tasks) and refused requests nested under them.

import { h } from '../dom.js';
import { policyWords, tokens, shortId } from '../format.js';
import { taskTree } from '../model.js';
import { pill, budgetBar, whyButton, pastNote } from '../widgets.js';

// A task with more delegations than this starts folded, so a run with thousands of them draws at once.
const foldAbove = 100;

export function drawTree(v, d) {
  const st = (v.tabState.tree ||= { collapsed: new Set(), expanded: new Set() });
  const roots = taskTree(d.tasks, d.delegations, d.timeline);
  if (!roots.length) return h('div.panel', pastNote(d, 'Tasks'), h('p.empty', 'no tasks yet'));
  // One row per node, indented inside its first cell, so every column lines up whatever the depth.
  const rows = h('div.tree', { role: 'tree', 'aria-label': 'task tree' });
  const walk = (n, level) => {
    rows.append(treeRow(v, st, n, level));
    if (!isFolded(st, n)) for (const k of n.children) walk(k, level + 1);
  };
  for (const n of roots) walk(n, 1);
  const shadows = d.tasks.filter((t) => t.kind === 'shadow' || t.id.startsWith('gc-')).length;
  return h('div.panel', pastNote(d, 'The task tree'),
    h('div.row.small.muted', { style: { marginBottom: '6px' } },
      `${d.tasks.length - shadows} workflow task(s), ${shadows} shadow task(s), ${d.timeline.filter((e) => e.outcome === 'rejected').length} rejected request(s). `,
      'Delegations nest under the task that asked for them; ←/→ fold.'),
    h('div.node.head.small.muted', { 'aria-hidden': 'true' }, h('span', 'task'), h('span', 'role'), h('span', 'status'),
      h('span', 'depth'), h('span', 'model'), h('span', 'title'), h('span', 'budget (spent of granted)')),
    rows);
}

function treeRow(v, st, n, level) {
  const t = n.task;
  const dl = n.delegation;
  const rej = n.rejection;
  const kids = n.children;
  const collapsed = isFolded(st, n);
  const indent = { paddingLeft: `${(level - 1) * 22}px` };
  let row;
  if (rej) {
    row = h('div.node.rejected', { role: 'treeitem', 'aria-level': level, tabindex: 0, 'data-nav': '', 'data-key': `rej:${rej.key}`, 'data-rejection': rej.reason },
      h('span.cell-id', { style: indent }, h('span.toggle'), h('span.id.mono', { title: rej.subId }, shortId(rej.subId || '(no subId)'))),
      h('span', rej.role || '–'), h('span', pill('rejected')),
      h('span', '–'), h('span', '–'),
      h('span.title', { title: policyWords(rej.reason, rej.policy, rej.message) }, h('span.code.mono.st-bad', rej.reason), ' ', policyWords(rej.reason, rej.policy, rej.message)),
      h('span', whyButton(rej.rejectedPosition, { label: 'why?' })));
  } else {
    const status = (dl && dl.status) || (t && t.status);
    const alloc = t && t.allocation;
    const shadow = (t && t.kind === 'shadow') || (!t && dl) || n.id.startsWith('gc-');
    row = h('div.node', {
      role: 'treeitem', 'aria-level': level, 'aria-expanded': kids.length ? String(!collapsed) : null,
      tabindex: 0, 'data-nav': '', 'data-key': `node:${n.id}`, 'data-node': n.id,
    },
    h('span.cell-id', { style: indent },
      kids.length
        ? h('button.toggle', { type: 'button', tabindex: -1, 'aria-label': collapsed ? 'expand' : 'collapse', onclick: () => toggle(v, st, n) }, collapsed ? '▸' : '▾')
        : h('span.toggle'),
      h('span.mono.nowrap', { title: n.id }, shortId(n.id)), ' ', h('span.kind', shadow ? 'shadow' : 'task'),
      collapsed && kids.length ? h('span.small.muted', ` +${kids.length}`) : null),
    h('span', (t && t.role) || (dl && dl.role) || '–'),
    h('span', pill(status), dl && dl.cancelRequested && dl.status !== 'cancelled' ? h('span.small.st-warn', ' cancel asked') : null),
    h('span', String((t && t.depth) || (dl && dl.depth) || 1)),
    h('span.small.mono', { title: (t && t.model) || (dl && dl.model) || '' }, (t && t.model) || (dl && dl.model) || '–'),
    h('span.title', { title: (t && t.title) || (dl && dl.title) || '' }, (t && t.title) || (dl && dl.title) || ''),
    alloc
      ? budgetBar(alloc.tokensSpent, alloc.tokensGranted, { label: `budget of ${n.id}` })
      : dl ? h('span.small.muted', dl.metered ? `reserved ${tokens(dl.reservedTokens)}` : 'unmetered') : h('span.small.muted', 'no allocation'));
  }
  row.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowRight' && kids.length && collapsed) toggle(v, st, n);
    else if (e.key === 'ArrowLeft' && kids.length && !collapsed) toggle(v, st, n);
    else if (e.key === 'Enter' && rej) row.querySelector('button.why').click();
    else if (e.key === 'Enter' && dl) v.ctx.go(`#/run/${encodeURIComponent(v.runId)}/timeline`);
    else return;
    e.preventDefault();
  });
  return row;
}

function isFolded(st, n) {
  return st.collapsed.has(n.id) || (n.children.length > foldAbove && !st.expanded.has(n.id));
}

function toggle(v, st, n) {
  const id = n.id;
  if (isFolded(st, n)) {
    st.collapsed.delete(id);
    st.expanded.add(id);
  } else {
    st.expanded.delete(id);
    st.collapsed.add(id);
  }
  v.draw();
  const again = v.body.querySelector(`[data-key="${CSS.escape(`node:${id}`)}"]`);
  if (again) again.focus();
}

