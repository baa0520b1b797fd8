// views/mailbox.js: the run's mailboxes by kind with their delivered and acknowledged state, and one box's messages.

import { h, replace } from '../dom.js';
import { api } from '../api.js';
import { clock, parseTime, shortId } from '../format.js';
import { groupBy } from '../model.js';
import { pill, table } from '../widgets.js';

// Boxes read for the overview: the run inbox and at most this many tasks.
const maxBoxes = 40;

export function drawMailbox(v, d) {
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
