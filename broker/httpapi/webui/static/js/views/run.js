// views/run.js: one run. The header (status, budget, slots held, health),
// the time-travel bar, and the tabs drawn by tabs.js. Live, the tabs read the
// run's current projections and follow the stream; moved into the past, they
// read the run as of a position (state?at=) and the stream only extends the
// slider.

import { h, replace } from '../dom.js';
import { api, maxRunEvents } from '../api.js';
import { latestOnly } from '../retry.js';
import { age, clock, countdown, parseTime, tokens } from '../format.js';
import { background, coalesce, ticker } from '../live.js';
import { delegationTimeline, healthItems, nearestIndex } from '../model.js';
import { pill, budgetBar } from '../widgets.js';
import { tabs } from './tabs.js';

// What each tab reads, live.
const needs = {
  tree: ['tasks', 'delegations'],
  timeline: [],
  ledger: ['ledger', 'delegations'],
  asks: ['asks'],
  mailbox: ['tasks'],
  jobs: ['jobs'],
  credentials: ['credentials'],
  events: [],
};

export class RunView {
  constructor(ctx, runId, tab) {
    this.ctx = ctx;
    this.runId = runId;
    this.tab = tabs.some((t) => t.id === tab) ? tab : 'tree';
    this.live = { run: null, tasks: [], delegations: [], ledger: [], asks: [], credentials: [], jobs: [] };
    this.loaded = new Set();
    this.events = [];
    this.positions = [];
    this.lastPosition = 0;
    this.eventsReady = false;
    this.eventsDropped = 0; // the oldest events let go to hold at most maxRunEvents
    this.past = null; // the state?at answer while travelling
    this.tabState = {}; // per-tab UI state (filters, expanded nodes, selected mailbox)
    this.refresh = coalesce(() => this.refreshLive(), 400);
    this.redraw = coalesce(async () => this.draw(), 150);
  }

  async mount(el) {
    this.el = el;
    this.head = h('section.run-head-wrap');
    this.health = h('div');
    this.travel = h('section.panel.travel', { 'aria-label': 'time travel' });
    this.tabBar = h('nav.tabs', { role: 'tablist', 'aria-label': 'run views' });
    this.body = h('section', { role: 'tabpanel' });
    replace(el, this.head, this.health, this.travel, this.tabBar, this.body);
    this.drawTabBar();
    const run = await api.run(this.runId);
    this.live.run = run;
    this.drawHead();
    this.drawTravel();
    this.body.append(h('p.loading', 'loading…'));
    const eventsLoad = this.loadEvents();
    await this.fetchLive(needs[this.tab]);
    this.draw();
    this.stopTick = ticker(() => this.tick());
    await eventsLoad;
    background(this.fetchLive(['credentials', 'delegations']).then(() => this.drawHealth()), 'reading the run’s health');
  }

  // --- data ---------------------------------------------------------------

  async loadEvents() {
    const res = await api.events(this.runId, 0, {
      onPage: (_, page) => {
        this.addEvents(page.events || []);
        this.drawTravel();
      },
    });
    this.eventsTruncated = res.truncated;
    this.eventsReady = true;
    this.drawTravel();
    this.redraw();
    await this.catchUp();
  }

  /** catchUp reads the run's events after the last one held: those the stream may not have carried. */
  async catchUp() {
    if (!this.eventsReady || this.eventsTruncated) return;
    const before = this.events.length;
    const res = await api.events(this.runId, this.lastPosition);
    this.addEvents(res.items);
    if (this.events.length === before) return;
    this.drawTravel();
    if (!this.past) this.refresh();
  }

  onConnected() {
    background(this.catchUp(), 'catching up the run’s events');
  }

  /**
   * addEvents adds events not held yet, keeping position order; O(1) per event in the usual (ascending) case. Beyond
   * maxRunEvents the oldest go, a tenth of them at once so that a busy stream does not move every held event for each
   * one it brings; the travel position stays on its event while that event is held, and is the oldest held one once
   * it is let go.
   */
  addEvents(list) {
    let unsorted = false;
    let added = false;
    for (const ev of list) {
      const p = ev.metadata && ev.metadata.position;
      // Once the oldest were let go, older events (a resync's read from the start) stay gone.
      if (!p || this.seen(p) || (this.eventsDropped && p < this.positions[0])) continue;
      if (p < this.lastPosition) unsorted = true;
      this.events.push(ev);
      this.positions.push(p);
      this.lastPosition = Math.max(this.lastPosition, p);
      added = true;
    }
    if (unsorted) {
      this.events.sort((a, b) => a.metadata.position - b.metadata.position);
      this.positions = this.events.map((e) => e.metadata.position);
    }
    if (this.events.length > maxRunEvents) {
      const drop = this.events.length - maxRunEvents + Math.floor(maxRunEvents / 10);
      this.events.splice(0, drop);
      this.positions.splice(0, drop);
      this.eventsDropped += drop;
      if (this.travelIndex !== undefined) this.travelIndex = Math.max(0, this.travelIndex - drop);
    }
    if (added) this.timelineCache = null;
  }

  seen(p) {
    if (p > this.lastPosition) return false;
    const i = nearestIndex(this.positions, p);
    return this.positions[i] === p;
  }

  async fetchLive(what) {
    const todo = what.filter(Boolean);
    await Promise.all(todo.map(async (k) => {
      const res = await api[k](this.runId);
      this.live[k] = res.items;
      this.loaded.add(k);
    }));
  }

  async refreshLive() {
    this.live.run = await api.run(this.runId);
    await this.fetchLive([...needs[this.tab], 'delegations']);
    if (this.past) {
      this.drawTravel();
      return;
    }
    this.drawHead();
    this.drawHealth();
    this.draw();
  }

  /** data is what the tabs draw: the live projections, or the run as of the travel position. */
  data() {
    const timeline = this.timeline();
    // A past state on its way is not shown yet: the tabs keep drawing what they had.
    if (this.past && !this.past.pending) {
      const p = this.past;
      const upto = p.position;
      const upTo = this.events.filter((e) => e.metadata.position <= upto);
      return {
        // now is the moment shown: ages and countdowns of the past are as they were then.
        past: true, position: upto, now: parseTime((upTo[upTo.length - 1] || {}).time) || Date.now(), run: p.run, tasks: p.tasks || [], delegations: p.delegations || [],
        ledger: p.ledger || [], asks: p.asks || [], slots: p.slots, credentials: this.live.credentials, jobs: this.live.jobs,
        events: upTo,
        timeline: delegationTimeline(upTo),
      };
    }
    return { past: false, now: Date.now(), ...this.live, events: this.events, timeline };
  }

  timeline() {
    if (!this.timelineCache) this.timelineCache = delegationTimeline(this.events);
    return this.timelineCache;
  }

  // --- live ---------------------------------------------------------------

  onEvent(ev) {
    if (ev.runId !== this.runId) return;
    this.addEvents([ev]);
    // The slider follows once per frame however many events arrive.
    if (!this.travelFrame) {
      this.travelFrame = requestAnimationFrame(() => {
        this.travelFrame = null;
        this.drawTravel();
      });
    }
    if (this.past) return;
    this.refresh();
    if (this.tab === 'timeline' || this.tab === 'events') this.redraw();
  }

  onResync() {
    background(this.loadEvents().then(() => this.refresh.now()), 're-reading the run after a resync');
  }

  // --- time travel ---------------------------------------------------------

  /**
   * travelTo shows the run as of at (a position or a time). One rebuild at a time (retry.js, latestOnly): crewd
   * rebuilds a past state for each request and bounds how many one credential may have waiting, so moves made
   * while one is at crewd only remember the latest target, asked for when the answer arrives; a move made while a
   * refused one waits to be asked again (429, Retry-After) replaces it at once.
   */
  travelTo(at, { index } = {}) {
    if (!this.traveller) {
      this.traveller = latestOnly(({ at: a }, opts) => api.stateAt(this.runId, a, opts), {
        show: (st, { index: i }) => {
          this.past = st;
          if (i === undefined) this.travelIndex = nearestIndex(this.positions, st.position);
          this.drawHead();
          this.drawHealth();
          this.drawTravel();
          this.draw();
        },
        fail: (err) => {
          this.travelError = err.message;
          this.drawTravel();
        },
      });
    }
    this.traveller.ask({ at, index });
  }

  goLive() {
    // An answer on its way is dropped, and a refused read waiting to be asked again is not asked.
    if (this.traveller) this.traveller.cancel();
    this.past = null;
    this.travelIndex = undefined;
    this.travelError = null;
    this.drawTravel();
    this.drawHead();
    this.refresh.now();
  }

  step(delta) {
    if (!this.positions.length) return;
    const last = this.positions.length - 1;
    const from = this.past ? this.travelIndex ?? last : last;
    const to = Math.max(0, Math.min(last, from + delta));
    if (to === last && delta > 0) return this.goLive();
    this.travelIndex = to;
    this.past = this.past || { pending: true, position: this.positions[to] };
    this.drawTravel();
    this.travelTo(this.positions[to], { index: to });
  }

  drawTravel() {
    if (!this.travel) return;
    const n = this.positions.length;
    const last = Math.max(0, n - 1);
    const idx = this.past ? Math.min(this.travelIndex ?? last, last) : last;
    if (!this.slider) {
      this.slider = h('input#travel-slider', {
        type: 'range', min: 0, step: 1, 'aria-label': 'time travel: event of the run',
        'aria-keyshortcuts': '[ ]',
      });
      let debounce;
      this.slider.addEventListener('input', () => {
        const i = Number(this.slider.value);
        this.travelIndex = i;
        clearTimeout(debounce);
        if (i >= this.positions.length - 1) {
          this.goLive();
          return;
        }
        this.past = this.past || { pending: true, position: this.positions[i] };
        this.drawTravel();
        // NB: the position is taken now: the stream may let the oldest events go before the timer fires.
        const at = this.positions[i];
        debounce = setTimeout(() => this.travelTo(at, { index: i }), 120);
      });
      this.where = h('div.where', { 'aria-live': 'polite' });
      this.atInput = h('input', {
        type: 'text', placeholder: 'position or time', 'aria-label': 'travel to a position or a time', size: 18,
      });
      this.atInput.addEventListener('keydown', (e) => {
        if (e.key !== 'Enter') return;
        const v = this.atInput.value.trim();
        if (v) this.travelTo(toAt(v));
      });
      this.liveButton = h('button', { type: 'button', onclick: () => this.goLive(), title: 'back to live (l)' }, 'live');
      replace(this.travel,
        h('div.row', h('button', { type: 'button', title: 'one event back ([)', 'aria-label': 'one event back', onclick: () => this.step(-1) }, '◀'),
          h('button', { type: 'button', title: 'one event forward (])', 'aria-label': 'one event forward', onclick: () => this.step(1) }, '▶')),
        this.slider, this.atInput, h('div.row', this.where, this.liveButton));
    }
    this.slider.max = String(last);
    this.slider.value = String(idx);
    this.slider.disabled = n < 2;
    const ev = this.events[idx];
    this.travel.classList.toggle('past', !!this.past);
    this.liveButton.disabled = !this.past;
    const loading = this.eventsReady ? '' : ` (reading events: ${n}…)`;
    if (this.travelError) {
      replace(this.where, h('span.st-bad', this.travelError));
      this.travelError = null;
    } else if (this.past) {
      const p = this.past.pending ? this.positions[idx] : this.past.position;
      replace(this.where, h('span', { 'data-travel': 'past', 'data-position': p, 'data-pending': this.past.pending ? '' : null },
        h('b', 'as of position ', String(p)), ev ? ` · ${clock(parseTime(ev.time))} · ${ev.type}` : '',
        this.past.pending ? ' · reading…' : '', loading));
    } else {
      replace(this.where, h('span', { 'data-travel': 'live', 'data-ready': this.eventsReady ? '' : null }, h('b', 'live'),
        ` · position ${this.lastPosition || (this.live.run && this.live.run.position) || '–'} · ${n} events${loading}`));
    }
  }

  // --- drawing -------------------------------------------------------------

  drawHead() {
    const r = (this.past && this.past.run) || this.live.run;
    if (!r) return;
    const held = (this.past ? this.past.delegations || [] : this.live.delegations).filter((d) => d.holdsSlot ?? !['completed', 'failed', 'timed_out', 'cancelled'].includes(d.status)).length;
    replace(this.head,
      h('div.run-head',
        h('a', { href: '#/runs', title: 'back to runs (Esc)' }, '← runs'),
        h('span.goal', r.goal || '(no goal)'),
        pill(r.status),
        this.past ? h('span.pill.st-warn', 'past') : null),
      h('div.facts',
        h('span', 'run ', h('b.mono', r.runId)),
        h('span', 'team ', h('b', r.team || '–')),
        r.workflow ? h('span', 'workflow ', h('b', r.workflow)) : null,
        h('span', 'created ', h('b', { 'data-age': r.createdAt }, age(r.createdAt)), ' ago'),
        h('span', 'last event ', h('b', { 'data-age': r.updatedAt }, age(r.updatedAt)), ' ago'),
        h('span', 'slots held ', h('b', String(r.activeDelegations ?? held))),
        h('span.row', 'budget ', r.budgetTotal ? h('b', tokens(r.budgetUsed || 0)) : null,
          h('span', { style: { width: '220px' } }, budgetBar(r.budgetUsed || 0, r.budgetUnlimited ? 0 : r.budgetTotal,
            { warning: r.budgetWarning, abort: r.budgetAbort, label: 'run budget used' })))));
  }

  drawHealth() {
    if (this.past || !this.live.run) {
      replace(this.health);
      return;
    }
    const items = healthItems({ runs: [this.live.run], delegations: this.live.delegations, credentials: this.live.credentials },
      Date.now(), staleRunMs);
    // One line whatever the count: how many of each kind, the first of each, and where the rest are.
    const kinds = [
      ['quiet run', 'no event for a while', 'tree'],
      ['overdue delegation', 'delegation(s) past their deadline', 'timeline'],
      ['live credential', 'credential(s) still valid on terminal tasks', 'credentials'],
    ];
    const parts = kinds.map(([kind, words, tab]) => {
      const of = items.filter((it) => it.kind === kind);
      if (!of.length) return null;
      const first = of[0];
      const example = kind === 'quiet run' ? `running, no event for ${age(first.since)}`
        : kind === 'overdue delegation' ? `${first.subId} overdue ${age(first.since)}` : first.what;
      return h('span', { 'data-health-item': kind },
        h('a', { href: `#/run/${encodeURIComponent(this.runId)}/${tab}` }, kind === 'quiet run' ? words : `${of.length} ${words}`),
        h('span.muted', ` (${of.length > 1 ? 'first: ' : ''}${example})`));
    }).filter(Boolean);
    replace(this.health, parts.length
      ? h('div.notice.warn.small', { style: { marginBottom: '10px' } }, h('b', 'Needs a look: '),
        parts.map((p, i) => [i ? ' · ' : '', p]))
      : null);
  }

  drawTabBar() {
    replace(this.tabBar, tabs.map((t, i) => h('a', {
      href: `#/run/${encodeURIComponent(this.runId)}/${t.id}`, role: 'tab', 'aria-selected': String(t.id === this.tab),
      'data-tab': t.id, title: `${t.label} (${i + 1})`, 'aria-keyshortcuts': String(i + 1),
    }, t.label)));
  }

  showTab(tab) {
    if (!tabs.some((t) => t.id === tab)) tab = 'tree';
    this.tab = tab;
    this.drawTabBar();
    const missing = needs[tab].filter((k) => !this.loaded.has(k));
    if (missing.length && !this.past) background(this.fetchLive(missing).then(() => this.draw()), `reading ${missing.join(', ')}`);
    this.draw();
  }

  draw() {
    const t = tabs.find((x) => x.id === this.tab);
    const focusKey = document.activeElement && this.body.contains(document.activeElement) ? document.activeElement.dataset.key : null;
    replace(this.body, t.draw(this, this.data()));
    this.body.dataset.tab = t.id;
    if (focusKey) {
      const again = this.body.querySelector(`[data-key="${CSS.escape(focusKey)}"]`);
      if (again) again.focus();
    }
  }

  tick() {
    for (const el of this.el.querySelectorAll('[data-age]')) el.textContent = age(Number(el.dataset.age));
    for (const el of this.el.querySelectorAll('[data-deadline]')) {
      const deadline = Number(el.dataset.deadline);
      el.textContent = countdown(deadline);
      el.classList.toggle('st-bad', deadline < Date.now());
    }
  }

  onKey(e) {
    const n = Number(e.key);
    if (n >= 1 && n <= tabs.length) {
      this.ctx.go(`#/run/${encodeURIComponent(this.runId)}/${tabs[n - 1].id}`);
      return true;
    }
    if (e.key === '[' || e.key === '{') {
      this.step(e.shiftKey ? -10 : -1);
      return true;
    }
    if (e.key === ']' || e.key === '}') {
      this.step(e.shiftKey ? 10 : 1);
      return true;
    }
    if (e.key === 'l' && this.past) {
      this.goLive();
      return true;
    }
    const t = tabs.find((x) => x.id === this.tab);
    return t.onKey ? t.onKey(this, e) : false;
  }

  destroy() {
    if (this.traveller) this.traveller.cancel();
    this.refresh.cancel();
    this.redraw.cancel();
    if (this.travelFrame) cancelAnimationFrame(this.travelFrame);
    if (this.stopTick) this.stopTick();
  }
}

/** staleRunMs: a running run with no event for this long is flagged in health. */
export const staleRunMs = 5 * 60 * 1000;

/** toAt turns what was typed into state?at=: a position, an RFC 3339 time, or a clock time today. */
function toAt(v) {
  if (/^\d+$/.test(v)) return v;
  if (/^\d{1,2}:\d{2}(:\d{2})?$/.test(v)) {
    const [hh, mm, ss] = v.split(':').map(Number);
    const d = new Date();
    d.setHours(hh, mm, ss || 0, 999);
    return d.toISOString();
  }
  const t = Date.parse(v);
  return Number.isNaN(t) ? v : new Date(t).toISOString();
}
