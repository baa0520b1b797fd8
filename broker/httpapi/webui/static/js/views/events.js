// views/events.js: the run's raw events, newest first, with why? on every decision.

import { h } from '../dom.js';
import { maxRunEvents } from '../api.js';
import { clock, parseTime, matches } from '../format.js';
import { table, whyButton, pastNote } from '../widgets.js';

const explainable = new Set(['delegate.rejected', 'delegate.admitted', 'budget.reserved', 'budget.charged', 'delegate.timed_out',
  'delegate.completed', 'delegate.failed', 'delegate.cancelled', 'engine.configured', 'run.budget_warning', 'run.budget_abort']);

export function drawEvents(v, d) {
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
    h('div.row', { style: { marginBottom: '8px' } }, h('span.muted.small', `${d.events.length} events${held(v)}, newest first`), h('span.grow'), search),
    t, shown.length > st.limit ? h('button', { type: 'button', onclick: () => { st.limit += 300; v.draw(); } }, 'show more') : null);
}

function actor(a) {
  if (!a) return '';
  return a.taskId ? `${a.role}/${a.taskId}` : a.role;
}

// held says which of the run's events the page holds when not all of them (api.js, maxRunEvents).
function held(v) {
  const max = maxRunEvents.toLocaleString('en');
  if (v.eventsDropped) return ` (the page holds at most ${max}: the ${v.eventsDropped.toLocaleString('en')} oldest were let go)`;
  return v.eventsTruncated ? ` (the first ${max})` : '';
}
