// views/tabs.js: the tabs of the run view. Each draws from the data the run
// view hands it (live projections, or the run as of a past position), so the
// same code shows now and then.

import { h, replace } from '../dom.js';
import { api } from '../api.js';
import { age, clock, countdown, duration, parseTime, policyWords, tokens, matches, isTerminalTask } from '../format.js';
import { taskTree, groupBy } from '../model.js';
import { pill, budgetBar, table, whyButton } from '../widgets.js';

export const tabs = [
  { id: 'tree', label: 'Tasks', draw: drawTree },
  { id: 'timeline', label: 'Delegations', draw: drawTimeline },
  { id: 'ledger', label: 'Ledger', draw: drawLedger },
  { id: 'asks', label: 'Asks', draw: drawAsks },
  { id: 'mailbox', label: 'Mailbox', draw: drawMailbox },
  { id: 'credentials', label: 'Credentials', draw: drawCredentials },
  { id: 'events', label: 'Events', draw: drawEvents },
];

function pastNote(d, what) {
  return d.past ? h('p.muted.small', `${what} as of position ${d.position}.`) : null;
}

// --- task tree ---------------------------------------------------------------

// A task with more delegations than this starts folded, so a run with thousands of them draws at once.
const foldAbove = 100;

function drawTree(v, d) {
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

function shortId(id) {
  return id.startsWith('gc-') && id.length > 14 ? `${id.slice(0, 11)}…` : id;
}

// --- delegation timeline -----------------------------------------------------

const timelineFilters = ['all', 'rejected', 'in flight', 'settled'];

function drawTimeline(v, d) {
  const st = (v.tabState.timeline ||= { filter: 'all', q: '', limit: 200 });
  const all = d.timeline;
  const pick = (e) => {
    if (st.filter === 'rejected' && e.outcome !== 'rejected') return false;
    if (st.filter === 'in flight' && !['admitted', 'running', 'pending'].includes(e.outcome)) return false;
    if (st.filter === 'settled' && ['admitted', 'running', 'pending', 'rejected'].includes(e.outcome)) return false;
    return !st.q || matches(st.q, e.subId, e.parent, e.role, e.reason, e.outcome, e.model);
  };
  const shown = all.filter(pick).reverse();
  const search = h('input', { type: 'search', placeholder: 'search subId, parent, role, reason  ( / )', 'data-search': '', value: st.q, 'aria-label': 'search delegations', style: { width: '320px' } });
  search.addEventListener('input', () => {
    st.q = search.value.trim();
    const pos = search.selectionStart;
    v.draw();
    const again = v.body.querySelector('input[data-search]');
    again.focus();
    again.setSelectionRange(pos, pos);
  });
  const counts = { all: all.length };
  for (const e of all) {
    const k = e.outcome === 'rejected' ? 'rejected' : ['admitted', 'running', 'pending'].includes(e.outcome) ? 'in flight' : 'settled';
    counts[k] = (counts[k] || 0) + 1;
  }
  const chips = h('div.chips', { role: 'group', 'aria-label': 'delegation filter' }, timelineFilters.map((f) => h('button.chip', {
    type: 'button', 'aria-pressed': String(st.filter === f), onclick: () => { st.filter = f; v.draw(); },
  }, `${f} ${counts[f] || 0}`)));
  const list = h('div.timeline', { 'aria-label': 'delegation timeline' });
  for (const e of shown.slice(0, st.limit)) list.append(timelineRow(v, e, d));
  return h('div',
    pastNote(d, 'Delegations'),
    h('div.row.wrap', { style: { marginBottom: '8px' } }, chips, h('span.grow'), search),
    v.eventsReady ? null : h('p.loading', 'reading the run’s events…'),
    shown.length ? list : h('p.empty', all.length ? 'no delegation matches' : 'no delegation requested yet'),
    shown.length > st.limit ? h('button', { type: 'button', onclick: () => { st.limit += 200; v.draw(); } }, `show more (${shown.length - st.limit} left)`) : null);
}

function timelineRow(v, e, d) {
  const steps = e.steps.map((s) => h('span.step', pill(stepStatus(s.name), s.name),
    s.sincePrev ? h('span.dur', `+${duration(s.sincePrev)}`) : h('span.dur', clock(s.at))));
  const inFlight = ['admitted', 'running'].includes(e.outcome);
  if (inFlight) {
    // Live, the ages tick (data-age); in the past they are as they were at the travel position.
    steps.push(h('span.step', h('span.small.muted', 'in flight ', h('span', { 'data-age': d.past ? null : e.at }, age(e.at, d.now))),
      e.deadline ? h('span.small', { class: e.deadline < d.now ? 'st-bad' : 'muted' }, ' · deadline ', countdown(e.deadline, d.now)) : null));
  }
  const right = [h('div.tl-steps', steps)];
  if (e.outcome === 'rejected') {
    right.push(h('div.reason', { 'data-reason': e.reason },
      h('span.code', e.reason), ' — ', policyWords(e.reason, e.policy, e.message), ' ', whyButton(e.rejectedPosition)));
  } else if (e.admittedPosition) {
    const budget = e.metered ? `reserved ${tokens(e.reserved)} tokens` : 'unmetered';
    right.push(h('div.small.muted', `depth ${e.depth ?? '–'} · ${e.model || 'parent’s model'} · ${budget}`,
      e.usageTokens ? ` · used ${tokens(e.usageTokens)}` : '', e.expired ? ' · expired by the engine clock' : '',
      e.total ? ` · ${duration(e.total)} in all` : '', ' ',
      whyButton(e.reservedPosition || e.admittedPosition, { label: 'why admitted?' }),
      e.chargedPosition ? whyButton(e.chargedPosition, { label: 'why charged?' }) : null));
  }
  return h('div.tl-row', { tabindex: 0, 'data-nav': '', 'data-key': `tl:${e.key}`, 'data-sub': e.subId, 'data-outcome': e.outcome },
    h('div', h('div.mono', { title: e.subId }, e.subId || '(refused before a subId)'),
      h('div.small.muted', `${e.parent || '?'} → ${e.role || '?'}`)),
    h('div', right));
}

function stepStatus(name) {
  return { requested: 'requested', admitted: 'admitted', rejected: 'rejected', spawned: 'running', completed: 'completed',
    failed: 'failed', 'timed out': 'timed_out', cancelled: 'cancelled', 'cancel requested': 'warn' }[name] || 'queued';
}

// --- ledger ------------------------------------------------------------------

function drawLedger(v, d) {
  const st = (v.tabState.ledger ||= { open: null });
  const holders = d.delegations.filter((x) => x.holdsSlot ?? !['completed', 'failed', 'timed_out', 'cancelled'].includes(x.status));
  const cols = [
    { label: 'task', cell: (a) => h('span.mono', a.taskId) },
    { label: 'granted', class: 'right', cell: (a) => String(a.tokensGranted) },
    { label: 'spent', class: 'right', cell: (a) => String(a.tokensSpent) },
    { label: 'reserved', class: 'right', cell: (a) => String(a.reserved ?? '–') },
    { label: 'charged', class: 'right', cell: (a) => String(a.charged ?? '–') },
    { label: 'remaining', class: 'right', cell: (a) => h('b', String(a.remaining ?? a.tokensGranted - a.tokensSpent)) },
    { label: 'spent of grant', cell: (a) => budgetBar(a.tokensSpent, a.tokensGranted, { label: `budget of ${a.taskId}` }) },
    { label: 'history', class: 'small muted nowrap', cell: (a) => `${a.reservationCount ?? (a.reservations || []).length} reservations, ${a.chargeCount ?? (a.charges || []).length} charges` },
  ];
  const history = h('div');
  const t = table(cols, d.ledger, {
    open: (a) => {
      st.open = a.taskId;
      ledgerHistory(v, d, a.taskId, history);
    },
    empty: 'no task has an allocation yet (a metered delegation seeds one)',
    caption: 'ledger',
  });
  for (const [i, tr] of [...t.querySelectorAll('tbody tr')].entries()) tr.dataset.key = `acct:${d.ledger[i].taskId}`;
  if (st.open) ledgerHistory(v, d, st.open, history);
  return h('div.grid2',
    h('div.panel', pastNote(d, 'The ledger'), h('h2', { style: { marginTop: 0 } }, 'Budget per task ', h('span.count', '(Enter on a row: its reservations and charges)')), t, history),
    h('div.panel', h('h2', { style: { marginTop: 0 } }, 'Slots held by this run'),
      holders.length
        ? h('ul.holders', holders.map((x) => h('li', h('span.mono', x.subId), ' ', pill(x.status), h('span.muted', ` for ${x.parentTaskId}`))))
        : h('p.empty', 'none'),
      d.slots ? h('p.small.muted', `pool then: ${d.slots.held} of ${d.slots.capacity} held`) : null));
}

async function ledgerHistory(v, d, taskId, el) {
  replace(el, h('p.loading', `history of ${taskId}…`));
  try {
    const hist = await api.ledgerHistory(v.runId, taskId);
    // Travelling, the history stops at the time of the travel position.
    const until = d.past ? d.now : Infinity;
    const bySub = new Map(d.timeline.map((e) => [e.subId, e]));
    const rows = [
      ...(hist.reservations || []).filter((r) => r.at <= until).map((r) => ({ kind: 'reserved', ...r, pos: (bySub.get(r.subId) || {}).reservedPosition || (bySub.get(r.subId) || {}).admittedPosition })),
      ...(hist.charges || []).filter((r) => r.at <= until).map((r) => ({ kind: 'charged', ...r, pos: (bySub.get(r.subId) || {}).chargedPosition })),
    ].sort((a, b) => a.at - b.at);
    replace(el, h('h3', `History of ${taskId}`), table([
      { label: 'when', class: 'nowrap', cell: (r) => clock(r.at) },
      { label: 'change', cell: (r) => pill(r.kind === 'reserved' ? 'admitted' : 'warn', r.kind) },
      { label: 'delegation', cell: (r) => h('span.mono', r.subId) },
      { label: 'tokens', class: 'right', cell: (r) => String(r.tokens) },
      { label: 'detail', class: 'small muted', cell: (r) => (r.kind === 'charged' ? `used ${r.usageTokens}, reserved ${r.reservedTokens}` : '') },
      { label: '', cell: (r) => (r.pos ? whyButton(r.pos) : h('span.muted.small', 'position unknown')) },
    ], rows, { empty: 'no budget change yet' }), hist.hasMore ? h('p.small.muted', 'showing the first 1000 changes') : null);
  } catch (err) {
    replace(el, h('p.notice.bad', `history of ${taskId}: ${err.message}`));
  }
}

// --- asks --------------------------------------------------------------------

function drawAsks(v, d) {
  const pending = d.asks.filter((a) => a.status === 'pending');
  const done = d.asks.filter((a) => a.status !== 'pending');
  const cols = [
    { label: 'task', cell: (a) => h('span.mono', a.taskId) },
    { label: 'question', cell: (a) => h('span', a.question, a.options && a.options.length ? h('span.muted', ` [${a.options.join(' / ')}]`) : null) },
    { label: 'asked', class: 'nowrap', cell: (a) => clock(a.askedAt) },
    { label: 'status', cell: (a) => pill(a.status) },
  ];
  return h('div',
    pastNote(d, 'Asks'),
    h('div.panel', h('h2', { style: { marginTop: 0 } }, 'Pending ', h('span.count', String(pending.length))),
      table([...cols, {
        label: 'deadline', class: 'nowrap', cell: (a) => h('span', { 'data-deadline': d.past ? null : a.deadline, class: a.deadline < d.now ? 'st-bad' : '' },
          countdown(a.deadline, d.now)),
      }, { label: 'timeout', class: 'small muted', cell: (a) => `${a.timeoutSec} s${a.clamped ? ' (clamped)' : ''}` }],
      pending, { empty: 'no question is waiting for an answer' })),
    h('h2', 'Answered or timed out ', h('span.count', String(done.length))),
    h('div.panel', table([...cols, { label: 'resolved', class: 'nowrap', cell: (a) => clock(a.resolvedAt) }], done.slice().reverse(), { empty: 'none yet' })));
}

// --- mailbox -------------------------------------------------------------------

// Boxes read for the overview: the run inbox and at most this many tasks.
const maxBoxes = 40;

function drawMailbox(v, d) {
  const st = (v.tabState.mailbox ||= { box: null });
  const boxes = [['', 'run inbox'], ...d.tasks.filter((t) => t.kind !== 'shadow').map((t) => [t.id, `task ${t.id}`]),
    ...d.tasks.filter((t) => t.kind === 'shadow').map((t) => [t.id, `shadow ${shortId(t.id)}`])];
  // The elements outlive redraws, so a live refresh replaces their rows without a flash of "reading…".
  st.summary ||= h('div', h('p.loading', 'reading the mailboxes…'));
  st.list ||= h('div');
  const select = h('select', { 'aria-label': 'mailbox' }, boxes.map(([id, label]) => h('option', { value: id, selected: id === st.box }, label)));
  select.addEventListener('change', () => {
    st.box = select.value;
    replace(st.list, h('p.loading', 'reading the mailbox…'));
    loadBox(v, st.box, st.list);
  });
  loadMailboxes(v, st, boxes.slice(0, maxBoxes + 1), select);
  return h('div.panel',
    d.past ? h('p.muted.small', 'Mailboxes are shown live; they are not part of the time-travel view.') : null,
    h('h2', { style: { marginTop: 0 } }, 'Mailboxes by kind'), st.summary,
    h('div.row', { style: { marginTop: '12px' } }, h('h2', { style: { margin: 0 } }, 'Messages of'), select),
    st.list);
}

async function loadMailboxes(v, st, boxes, select) {
  try {
    const read = await Promise.all(boxes.map(async ([id, label]) => ({ id, label, msgs: (await api.mailbox(v.runId, id || undefined, { max: 1000 })).items })));
    const rows = [];
    for (const b of read) {
      for (const [kind, msgs] of groupBy(b.msgs, (m) => m.kind || 'message')) {
        const n = (s) => msgs.filter((m) => m.status === s).length;
        rows.push({ box: b, kind, queued: n('queued'), delivered: n('delivered'), acknowledged: n('acknowledged'), total: msgs.length });
      }
    }
    replace(st.summary, table([
      { label: 'mailbox', cell: (r) => r.box.label },
      { label: 'kind', cell: (r) => h('span.mono.small', r.kind) },
      { label: 'queued', class: 'right', cell: (r) => countPill(r.queued, 'queued') },
      { label: 'delivered', class: 'right', cell: (r) => countPill(r.delivered, 'delivered') },
      { label: 'acknowledged', class: 'right', cell: (r) => countPill(r.acknowledged, 'acknowledged') },
    ], rows, {
      open: (r) => {
        st.box = r.box.id;
        select.value = r.box.id;
        loadBox(v, st.box, st.list);
      },
      empty: 'no message yet',
    }), boxes.length > maxBoxes ? h('p.small.muted', `the first ${maxBoxes} task mailboxes`) : null);
    if (st.box === null) {
      const first = read.find((b) => b.msgs.length);
      st.box = first ? first.id : '';
      select.value = st.box;
    }
    loadBox(v, st.box, st.list);
  } catch (err) {
    replace(st.summary, h('p.notice.bad', err.message));
  }
}

function countPill(n, status) {
  return n ? pill(status, String(n)) : h('span.muted', '0');
}

async function loadBox(v, box, el) {
  try {
    const res = await api.mailbox(v.runId, box || undefined);
    const byKind = groupBy(res.items, (m) => m.kind || 'message');
    if (!res.items.length) {
      replace(el, h('p.empty', 'empty'));
      return;
    }
    const parts = [];
    for (const [kind, msgs] of byKind) {
      const counts = groupBy(msgs, (m) => m.status);
      parts.push(h('div.kind-group', { 'data-kind': kind },
        h('h3', kind, ' ', h('span.count', [...counts].map(([s, l]) => `${l.length} ${s}`).join(', '))),
        table([
          { label: 'status', cell: (m) => pill(m.status) },
          { label: 'from → to', class: 'nowrap', cell: (m) => h('span.mono.small', `${m.from} → ${m.to}`) },
          { label: 'priority', cell: (m) => m.priority || '–' },
          { label: 'sent', class: 'nowrap', cell: (m) => clock(parseTime(m.createdAt)) },
          { label: 'delivered', class: 'nowrap', cell: (m) => clock(parseTime(m.deliveredAt)) },
          { label: 'acknowledged', class: 'nowrap', cell: (m) => clock(parseTime(m.acknowledgedAt)) },
          { label: 'body', cell: (m) => h('div.msg-body', m.subject ? h('b', m.subject, ' ') : null, m.body) },
        ], msgs.slice().reverse())));
    }
    if (res.truncated) parts.push(h('p.small.muted', `showing the first ${res.items.length} messages`));
    replace(el, parts);
  } catch (err) {
    replace(el, h('p.notice.bad', err.message));
  }
}

// --- credentials ---------------------------------------------------------------

function drawCredentials(v, d) {
  const cols = [
    { label: 'key', cell: (c) => h('span.mono', c.key) },
    { label: 'role', cell: (c) => c.role },
    { label: 'issued', class: 'nowrap', cell: (c) => `${clock(c.issuedAt)}${c.issuedBy ? ` by ${c.issuedBy}` : ''}` },
    { label: 'state', cell: (c) => (c.revoked ? pill('revoked') : pill('ok', 'valid')) },
    { label: 'revoked', class: 'nowrap', cell: (c) => (c.revoked ? `${clock(c.revokedAt)}${c.revokedBy ? ` by ${c.revokedBy}` : ''}` : '–') },
    { label: 'task status', cell: (c) => (c.taskStatus ? pill(c.taskStatus) : h('span.muted', '–')) },
    {
      label: '', cell: (c) => (!c.revoked && c.taskStatus && isTerminalTask(c.taskStatus)
        ? h('span.st-warn.small', 'still valid on a terminal task') : ''),
    },
  ];
  return h('div.panel',
    d.past ? h('p.muted.small', 'Credentials are shown live; they are not part of the time-travel view.') : null,
    h('p.small.muted', 'Digests never leave crewd; this is who was let in, by whom, and whether it still is.'),
    table(cols, d.credentials, { empty: 'no credential issued', rowClass: (c) => (!c.revoked && c.taskStatus && isTerminalTask(c.taskStatus) ? 'warn' : null) }));
}

// --- events --------------------------------------------------------------------

const explainable = new Set(['delegate.rejected', 'delegate.admitted', 'budget.reserved', 'budget.charged', 'delegate.timed_out',
  'delegate.completed', 'delegate.failed', 'delegate.cancelled', 'engine.configured', 'run.budget_warning', 'run.budget_abort']);

function drawEvents(v, d) {
  const st = (v.tabState.events ||= { q: '', limit: 300 });
  const shown = d.events.filter((e) => !st.q || matches(st.q, e.type, e.taskId, e.meaning, e.data && e.data.subId)).slice().reverse();
  const search = h('input', { type: 'search', placeholder: 'filter by type, task, text  ( / )', 'data-search': '', value: st.q, 'aria-label': 'filter events', style: { width: '320px' } });
  search.addEventListener('input', () => {
    st.q = search.value.trim();
    v.draw();
    const again = v.body.querySelector('input[data-search]');
    again.focus();
  });
  const rows = shown.slice(0, st.limit);
  const t = table([
    { label: 'pos', class: 'right mono', cell: (e) => String(e.metadata.position) },
    { label: 'time', class: 'nowrap', cell: (e) => clock(parseTime(e.time)) },
    { label: 'type', cell: (e) => h('span.mono.small', e.type) },
    { label: 'task', cell: (e) => h('span.mono.small', e.taskId || '') },
    { label: 'actor', class: 'small muted', cell: (e) => actor(e.metadata.actor) },
    { label: 'what happened', cell: (e) => e.meaning || e.message || '' },
    { label: '', cell: (e) => (explainable.has(e.type) ? whyButton(e.metadata.position, { event: e }) : '') },
  ], rows, { empty: v.eventsReady ? 'no event matches' : 'reading events…' });
  return h('div.panel', pastNote(d, 'Events'),
    h('div.row', { style: { marginBottom: '8px' } }, h('span.muted.small', `${d.events.length} events${v.eventsTruncated ? ' (the first 50,000)' : ''}, newest first`), h('span.grow'), search),
    t, shown.length > st.limit ? h('button', { type: 'button', onclick: () => { st.limit += 300; v.draw(); } }, 'show more') : null);
}

function actor(a) {
  if (!a) return '';
  return a.taskId ? `${a.role}/${a.taskId}` : a.role;
}
