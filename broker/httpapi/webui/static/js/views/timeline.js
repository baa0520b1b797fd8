// views/timeline.js: the delegation timeline: each request from requested to its outcome, with durations and reasons in words.

import { h } from '../dom.js';
import { age, clock, countdown, duration, policyWords, tokens, matches } from '../format.js';
import { pill, whyButton, pastNote } from '../widgets.js';

const timelineFilters = ['all', 'rejected', 'in flight', 'settled'];

export function drawTimeline(v, d) {
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
