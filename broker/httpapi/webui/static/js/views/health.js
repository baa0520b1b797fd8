// views/health.js: what needs a look across the daemon: running runs with no
// event for a long time, delegations past their deadline, and credentials
// still valid on terminal tasks.

import { h, replace } from '../dom.js';
import { api } from '../api.js';
import { age } from '../format.js';
import { coalesce, ticker } from '../live.js';
import { healthItems } from '../model.js';
import { table, pill } from '../widgets.js';
import { staleRunMs } from './run.js';

// Per-run lists are read for at most this many active runs per refresh, so a
// daemon with thousands of runs costs a bounded number of requests.
const maxRunsScanned = 25;

export class HealthView {
  constructor(ctx) {
    this.ctx = ctx;
    this.staleMs = staleRunMs;
    this.refresh = coalesce(() => this.load(), 5000);
  }

  async mount(el) {
    this.el = el;
    const stale = h('select', { 'aria-label': 'quiet for' },
      [[60e3, '1 minute'], [5 * 60e3, '5 minutes'], [15 * 60e3, '15 minutes'], [60 * 60e3, '1 hour']].map(([ms, l]) =>
        h('option', { value: ms, selected: ms === this.staleMs }, l)));
    stale.addEventListener('change', () => {
      this.staleMs = Number(stale.value);
      this.draw();
    });
    this.out = h('div', h('p.loading', 'checking…'));
    replace(el, h('div.row', { style: { marginBottom: '10px' } }, h('h1', 'Health'), h('span.grow'),
      h('label.small.muted', 'a running run is quiet after no event for ', stale)), this.out);
    this.stopTick = ticker(() => {
      for (const e of el.querySelectorAll('[data-age]')) e.textContent = age(Number(e.dataset.age));
    });
    await this.load();
  }

  async load() {
    const page = await api.runs({ status: ['queued', 'planning', 'running', 'blocked'], limit: 1000, newest: true });
    const runs = page.runs;
    // Scan runs holding slots first (overdue delegations live there), then the most recent.
    const scan = [...runs].sort((a, b) => (b.activeDelegations || 0) - (a.activeDelegations || 0)).slice(0, maxRunsScanned);
    const per = await Promise.all(scan.map(async (r) => {
      const [dl, cr] = await Promise.all([
        r.activeDelegations ? api.delegations(r.runId) : { items: [] },
        api.credentials(r.runId),
      ]);
      return { delegations: dl.items, credentials: cr.items };
    }));
    this.data = {
      runs,
      delegations: per.flatMap((p) => p.delegations),
      credentials: per.flatMap((p) => p.credentials),
      scanned: scan.length,
      more: page.hasMore || runs.length > scan.length,
    };
    this.draw();
  }

  draw() {
    const d = this.data;
    if (!d) return;
    const items = healthItems(d, Date.now(), this.staleMs);
    const kinds = ['quiet run', 'overdue delegation', 'live credential'];
    const titles = {
      'quiet run': 'Running, but no event for a long time',
      'overdue delegation': 'Delegations past their deadline',
      'live credential': 'Credentials still valid on terminal tasks',
    };
    replace(this.out,
      h('p.small.muted', `${d.runs.length} active run(s); delegations and credentials read for ${d.scanned} of them${d.more ? ' (the ones holding slots first)' : ''}.`),
      kinds.map((k) => {
        const list = items.filter((it) => it.kind === k);
        return h('section.panel', { style: { marginBottom: '12px' }, 'data-health': k },
          h('h2', { style: { marginTop: 0 } }, titles[k], ' ', list.length ? pill('warn', String(list.length)) : pill('ok', 'none')),
          table([
            { label: 'run', cell: (it) => h('a.mono', { href: `#/run/${encodeURIComponent(it.runId)}${k === 'live credential' ? '/credentials' : k === 'overdue delegation' ? '/timeline' : ''}` }, it.runId) },
            { label: 'what', cell: (it) => it.what },
            { label: 'for', class: 'nowrap', cell: (it) => (k === 'live credential' ? '' : h('span', { 'data-age': it.since }, age(it.since))) },
          ], list, { open: (it) => this.ctx.go(`#/run/${encodeURIComponent(it.runId)}`), empty: 'all clear' }));
      }));
  }

  onEvent() {
    this.refresh();
  }

  onResync() {
    this.refresh.now();
  }

  destroy() {
    this.refresh.cancel();
    if (this.stopTick) this.stopTick();
  }
}
