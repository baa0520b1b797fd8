// views/runs.js: the run list (status, team, goal, age, budget with its
// thresholds, active delegations; filter and search) and the slot pool.

import { h, replace } from '../dom.js';
import { api } from '../api.js';
import { age, middle } from '../format.js';
import { background, coalesce, ticker } from '../live.js';
import { pill, budgetBar, gauge, table } from '../widgets.js';

const statusFilters = {
  all: [],
  active: ['queued', 'planning', 'running', 'blocked'],
  running: ['running'],
  blocked: ['blocked'],
  completed: ['completed'],
  failed: ['failed'],
  cancelled: ['cancelled'],
};

export class RunsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.filter = sessionStorage.getItem('crewlog.runs.filter') || 'all';
    this.q = sessionStorage.getItem('crewlog.runs.q') || '';
    this.runs = [];
    this.cursor = null;
    this.hasMore = false;
    this.slots = null;
    this.refresh = coalesce(() => this.load(false), 500);
  }

  async mount(el) {
    this.el = el;
    const search = h('input', {
      type: 'search', placeholder: 'search id, team, goal, workflow  ( / )', 'data-search': '', value: this.q,
      'aria-label': 'search runs', style: { width: '340px' },
    });
    let debounce;
    search.addEventListener('input', () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => {
        this.q = search.value.trim();
        sessionStorage.setItem('crewlog.runs.q', this.q);
        this.load(false);
      }, 250);
    });
    this.chips = h('div.chips', { role: 'group', 'aria-label': 'status filter' },
      Object.keys(statusFilters).map((f) => h('button.chip', {
        type: 'button', 'aria-pressed': String(f === this.filter), 'data-filter': f,
        onclick: () => this.setFilter(f),
      }, f)));
    this.list = h('div', h('p.loading', 'loading runs…'));
    this.more = h('div');
    this.slotPanel = h('section.panel', { 'aria-label': 'slot pool' }, h('p.loading', 'slots…'));
    replace(el, h('div.grid2',
      h('section', { 'aria-label': 'runs' },
        h('div.row.wrap', { style: { marginBottom: '10px' } }, h('h1', 'Runs'), h('span.grow'), this.chips, search),
        h('div.panel', this.list, this.more)),
      this.slotPanel));
    this.stopTick = ticker(() => this.tickAges());
    await Promise.all([this.load(false), this.loadSlots()]);
  }

  setFilter(f) {
    this.filter = f;
    sessionStorage.setItem('crewlog.runs.filter', f);
    for (const b of this.chips.children) b.setAttribute('aria-pressed', String(b.dataset.filter === f));
    this.load(false);
  }

  params(cursor) {
    return { status: statusFilters[this.filter], q: this.q, newest: true, cursor };
  }

  async load(more) {
    if (more) {
      const page = await api.runs({ ...this.params(this.cursor), limit: 100 });
      this.runs.push(...page.runs);
      this.cursor = page.nextCursor;
      this.hasMore = page.hasMore;
    } else {
      // A live refresh re-reads as many rows as are shown (up to a page of 1000).
      const limit = Math.min(1000, Math.max(100, this.runs.length));
      const page = await api.runs({ ...this.params(), limit });
      this.runs = page.runs;
      this.cursor = page.nextCursor;
      this.hasMore = page.hasMore;
    }
    this.draw();
  }

  async loadSlots() {
    this.onSlots(await api.slots());
  }

  draw() {
    const focused = document.activeElement && document.activeElement.dataset.key;
    const cols = [
      { label: 'status', cell: (r) => pill(r.status) },
      { label: 'run', class: 'nowrap', cell: (r) => h('a.mono', { href: `#/run/${encodeURIComponent(r.runId)}`, title: r.runId }, middle(r.runId, 24)) },
      { label: 'team', cell: (r) => r.team },
      { label: 'goal', class: 'goal', cell: (r) => h('span', { title: r.goal }, r.goal) },
      { label: 'age', class: 'nowrap', cell: (r) => h('span', { 'data-age': r.createdAt }, age(r.createdAt)) },
      {
        label: 'budget used', cell: (r) => budgetBar(r.budgetUsed || 0, r.budgetUnlimited ? 0 : r.budgetTotal, {
          warning: r.budgetWarning, abort: r.budgetAbort, label: `budget of run ${r.runId}`,
        }),
      },
      { label: 'in flight', class: 'right', cell: (r) => h('span', { title: 'active delegations (slots held)' }, String(r.activeDelegations ?? 0)) },
      { label: 'last event', class: 'nowrap muted', cell: (r) => h('span', { 'data-age': r.updatedAt }, age(r.updatedAt)) },
    ];
    const t = table(cols, this.runs, {
      open: (r) => this.ctx.go(`#/run/${encodeURIComponent(r.runId)}`),
      empty: this.q || this.filter !== 'all' ? 'no run matches' : 'no runs yet — start a crew (see the README: crewbench sim)',
      caption: 'runs',
    });
    for (const [i, tr] of [...t.querySelectorAll('tbody tr')].entries()) {
      tr.dataset.key = this.runs[i].runId;
      tr.dataset.run = this.runs[i].runId;
    }
    replace(this.list, t);
    replace(this.more, this.hasMore
      ? h('div.row', { style: { marginTop: '8px' } }, h('button', { type: 'button', onclick: () => background(this.load(true), 'reading more runs') }, 'load more'),
        h('span.muted.small', `${this.runs.length} shown`))
      : h('p.muted.small', `${this.runs.length} run${this.runs.length === 1 ? '' : 's'}`));
    if (focused) {
      const again = this.list.querySelector(`tr[data-key="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }

  tickAges() {
    for (const el of this.el.querySelectorAll('[data-age]')) el.textContent = age(Number(el.dataset.age));
  }

  onSlots(s) {
    this.slots = s;
    const holders = s.holders || (s.subIds || []).map((subId) => ({ subId }));
    replace(this.slotPanel,
      h('h2', { style: { marginTop: 0 } }, 'Slot pool'),
      h('div.gauge', gauge(s.held, s.capacity),
        h('div', h('div', h('b', String(s.held)), ` of ${s.capacity} slots held`),
          h('div.muted.small', 'a slot is held from admission until the delegation settles'))),
      h('h3', 'held by'),
      holders.length
        ? h('ul.holders', holders.map((x) => h('li',
          x.runId ? h('a.mono', { href: `#/run/${encodeURIComponent(x.runId)}/timeline`, title: `${x.subId} of run ${x.runId}` }, middle(x.subId, 22)) : h('span.mono', { title: x.subId }, middle(x.subId, 22)),
          x.runId ? h('span.muted.small', { title: x.runId }, ` · ${middle(x.runId, 20)}`) : null)))
        : h('p.empty', 'no delegation in flight'));
  }

  onEvent() {
    this.refresh();
  }

  onResync() {
    this.refresh.now();
  }

  onConnected() {
    this.refresh();
  }

  destroy() {
    this.refresh.cancel();
    if (this.stopTick) this.stopTick();
  }
}
