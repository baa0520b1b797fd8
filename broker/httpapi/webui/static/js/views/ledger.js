// views/ledger.js: the budget ledger per task, with its reservations and charges, and the slots the run holds.

import { h, replace } from '../dom.js';
import { api } from '../api.js';
import { clock, tokens } from '../format.js';
import { pill, budgetBar, table, whyButton, pastNote } from '../widgets.js';

export function drawLedger(v, d) {
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
      d.slots ? h('p.small.muted', d.slots.held == null
        ? `pool then: capacity ${d.slots.capacity}; the slots other runs held then are not kept per position`
        : `pool then: ${d.slots.held} of ${d.slots.capacity} held`) : null));
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
    el.dataset.history = taskId;
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
