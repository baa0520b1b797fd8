// widgets.js: the small pieces every view draws with: status pills, budget
// bars, the slot gauge, tables with keyboard-navigable rows, and the "why?"
// dialog that shows a recorded decision explained.

import { h, svg, replace } from './dom.js';
import { api } from './api.js';
import { policyWords, policyInputs, clock, parseTime, tokens } from './format.js';

/** pill is a status badge; its class colours it by status. */
export function pill(status, text) {
  return h(`span.pill.st-${String(status || 'unknown').replace(/[^a-z_]/gi, '')}`, text ?? status ?? '–');
}

/**
 * budgetBar draws used against total with ticks at the warning and abort
 * thresholds (fractions of total). Without a total it says so.
 */
export function budgetBar(used, total, { warning, abort, label } = {}) {
  if (!total || total <= 0) {
    return h('span.muted.small', used ? `${used} used, no budget` : 'no budget');
  }
  const frac = used / total;
  const level = abort !== undefined && frac >= abort ? 'bad' : warning !== undefined && frac >= warning ? 'warn' : '';
  const bar = h('div.bar', {
    role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': total, 'aria-valuenow': used,
    'aria-label': label || 'budget used', title: `${used} of ${total} (${(frac * 100).toFixed(1)} %)`,
  }, h(`div.fill${level ? `.${level}` : ''}`, { style: { width: `${Math.min(100, frac * 100)}%` } }));
  if (warning !== undefined && warning !== null) {
    bar.append(h('div.tick.warn', { style: { left: `${Math.min(100, warning * 100)}%` }, title: `warning at ${warning * 100} %` }));
  }
  if (abort !== undefined && abort !== null) {
    bar.append(h('div.tick.abort', { style: { left: `calc(${Math.min(100, abort * 100)}% - 2px)` }, title: `abort at ${abort * 100} %` }));
  }
  return h('div.budget', bar, h('span.small.nowrap', `${fmtPct(frac)} of ${tokens(total)}`));
}

function fmtPct(f) {
  return `${(f * 100).toFixed(f > 0 && f < 0.1 ? 1 : 0)} %`;
}

/** gauge is the slot pool: an arc for held/capacity. */
export function gauge(held, capacity) {
  const r = 34;
  const c = 2 * Math.PI * r * 0.75; // a three-quarter ring
  const frac = capacity > 0 ? Math.min(1, held / capacity) : 0;
  return svg('svg', { width: 90, height: 90, viewBox: '0 0 90 90', role: 'img', 'aria-label': `${held} of ${capacity} slots held` },
    svg('circle', { class: 'arc-bg', cx: 45, cy: 45, r, fill: 'none', 'stroke-width': 9,
      'stroke-dasharray': `${c} 999`, transform: 'rotate(135 45 45)', 'stroke-linecap': 'round' }),
    svg('circle', { class: `arc${frac >= 1 ? ' full' : ''}`, cx: 45, cy: 45, r, fill: 'none', 'stroke-width': 9,
      'stroke-dasharray': `${c * frac} 999`, transform: 'rotate(135 45 45)', 'stroke-linecap': 'round' }),
    svg('text', { x: 45, y: 50, 'text-anchor': 'middle' }, `${held}/${capacity}`));
}

/**
 * table renders rows into a <table>. columns: [{label, cell(row) → node|string, class?}].
 * With open(row), rows are focusable and Enter or a click opens them; j/k and
 * the arrow keys move between rows (main.js routes the keys to the focused table).
 */
export function table(columns, rows, { open, rowClass, empty = 'nothing yet', caption } = {}) {
  if (!rows.length) return h('div.empty', empty);
  const body = h('tbody');
  for (const row of rows) {
    const tr = h('tr', { class: rowClass ? rowClass(row) : null });
    if (open) {
      tr.tabIndex = 0;
      tr.addEventListener('click', (e) => {
        if (e.target.closest('a,button,input,select')) return;
        open(row);
      });
      tr.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && e.target === tr) open(row);
      });
    }
    for (const col of columns) tr.append(h('td', { class: col.class }, col.cell(row)));
    body.append(tr);
  }
  return h('div.table-wrap', h('table', caption ? h('caption.sr-only', caption) : null,
    h('thead', h('tr', columns.map((c) => h('th', { class: c.class }, c.label)))), body));
}

/** moveRow moves focus to the next (+1) or previous (-1) focusable row in the page. */
export function moveRow(delta) {
  const rows = [...document.querySelectorAll('main [data-nav], main tbody tr[tabindex]')]
    .filter((el) => el.offsetParent !== null);
  if (!rows.length) return;
  const at = rows.indexOf(document.activeElement);
  const next = rows[Math.max(0, Math.min(rows.length - 1, at < 0 ? 0 : at + delta))];
  next.focus();
  next.scrollIntoView({ block: 'nearest' });
}

let dialog;

/** showDialog opens the page's one modal dialog with a title and content; Esc closes it. */
export function showDialog(title, ...content) {
  if (!dialog) {
    dialog = h('dialog#dialog', { 'aria-labelledby': 'dialog-title' });
    document.body.append(dialog);
  }
  replace(dialog,
    h('div.row', h('h2#dialog-title.grow', title), h('button', { onclick: () => dialog.close(), 'aria-label': 'close' }, 'close')),
    ...content);
  if (!dialog.open) dialog.showModal();
  return dialog;
}

/**
 * whyButton is the "why?" on a rejection or a budget change: it fetches the
 * recorded decision behind the event at position (events/{position}/explain)
 * and shows it in words, with the policy inputs the event recorded.
 */
export function whyButton(position, { label = 'why?', event } = {}) {
  return h('button.why', {
    type: 'button', 'data-why': position, title: 'show the recorded explanation',
    onclick: (e) => {
      e.stopPropagation();
      explain(position, event);
    },
  }, label);
}

export async function explain(position, event) {
  const body = h('div', h('p.loading', 'reading the recorded decision…'));
  showDialog(`Event ${position}: why?`, body);
  try {
    const x = await api.explain(position);
    replace(body, explanation(x, event));
  } catch (err) {
    replace(body, h('p.notice.bad', `Could not explain position ${position}: ${err.message}`));
  }
}

function explanation(x, fallbackEvent) {
  const ev = x.event || fallbackEvent || {};
  const data = ev.data || {};
  const parts = [];
  parts.push(h('p', h('b', ev.type || 'event'), ' — ', x.meaning || ev.meaning || ''));
  if (ev.type === 'delegate.rejected') {
    parts.push(h('p.reason', { 'data-reason': data.reason },
      h('span.code', data.reason), ': ', policyWords(data.reason, data.policy, data.message)));
  }
  const d = x.decision;
  if (d) {
    parts.push(h('dl.kv',
      kv('decided', `${d.command} by ${d.actor || '–'} at ${clock(parseTime(d.time))}`),
      kv('subject', d.subject || '–'),
      kv('recorded outcome', d.recorded),
      kv('rule', d.rule),
      kv('re-run today', d.today),
      kv('events', d.position === d.last ? `position ${d.position}` : `positions ${d.position} … ${d.last}`),
      x.poolInputs === 'recorded' ? kv('slot pool', 'slots held in all and runs waiting: as the decision recorded them') : null,
      d.drift ? kv('policy drift', h('span.drift', 'today’s code decides differently than the log recorded')) : null));
    if (d.drift && d.differences) {
      parts.push(h('pre.small.mono', JSON.stringify(d.differences, null, 2)));
    }
  } else {
    parts.push(h('p.muted', 'This event is not a decision the audit re-runs (transitions, messages and asks are recorded as they came).'));
  }
  const inputs = policyInputs(data.policy);
  if (inputs.length) {
    parts.push(h('h3', 'What the policy saw'), h('dl.kv', inputs.map(([k, v]) => kv(k, v))));
  }
  if (ev.type === 'budget.reserved' || ev.type === 'budget.charged') {
    parts.push(h('h3', 'Budget change'), h('dl.kv', Object.entries(data).map(([k, v]) => kv(k, String(v)))));
  }
  return parts;
}

function kv(k, v) {
  return [h('dt', k), h('dd', v)];
}

/** pastNote says what a tab shows while travelling. */
export function pastNote(d, what) {
  return d.past ? h('p.muted.small', `${what} as of position ${d.position}.`) : null;
}
