// views/jobs.js: the run's dispatcher jobs (docs/design-jobs.md): each job's status and lease, its counts against
// their limits, its grant, and its proxied calls with their outcomes.

import { h } from '../dom.js';
import { age, proxyReasonWords } from '../format.js';
import { pill, table } from '../widgets.js';

export function drawJobs(v, d) {
  const jobs = d.jobs || [];
  return h('div',
    d.past ? h('p.muted.small', 'Jobs are shown live; they are not part of the time-travel view.') : null,
    jobs.length ? jobs.map(drawJob) : h('div.panel', h('p.muted', 'no job in this run')));
}

function drawJob(j) {
  const lim = j.limits || {};
  const calls = j.requests || [];
  return h('div.panel', { 'data-job': j.jobId },
    h('h2', { style: { marginTop: 0 } }, 'Job ', h('span.mono', j.jobId), ' ', pill(j.status)),
    h('div.facts',
      h('span', 'task ', h('b.mono', j.taskId)),
      h('span', { 'data-job-lease': j.leaseActive ? 'active' : 'none' }, 'lease ',
        j.leaseActive ? h('b', `generation ${j.generation}`) : h('b.muted', `none (generation ${j.generation})`),
        j.rootToolCallId ? [' · root ', h('b.mono', j.rootToolCallId)] : null),
      h('span', { 'data-job-inflight': j.inFlight }, 'in flight ', h('b', `${j.inFlight} / ${lim.maxInFlight ?? '–'}`)),
      h('span', 'request ids ', h('b', `${j.seen} / ${lim.maxRequests ?? '–'}`)),
      h('span', 'revoked roots ', h('b', `${j.revokedRoots ?? 0} / ${lim.revokedRoots ?? '–'}`),
        j.saturated ? h('span.st-bad', ' saturated: nested calls are refused') : null),
      h('span', 'updated ', h('b', { 'data-age': j.updatedAt }, age(j.updatedAt)), ' ago')),
    h('p.small.muted', 'grant: ', (j.grant || []).length
      ? (j.grant || []).map((g, i) => [i ? ', ' : '', h('span.mono', { title: `sha-256 ${g.fingerprint}` }, g.name),
        g.readOnly ? ' (read-only)' : ''])
      : 'none'),
    table([
      { label: 'request', cell: (q) => h('span.mono', q.requestId) },
      { label: 'tool', cell: (q) => h('span.mono', q.tool || '–') },
      { label: 'generation', cell: (q) => String(q.generation) },
      { label: 'args', class: 'small muted', cell: (q) => `${q.argsBytes} B` },
      { label: 'outcome', cell: (q) => pill(q.state) },
      {
        label: 'why', cell: (q) => (q.state === 'rejected'
          ? h('span.st-bad', { 'data-reason': q.reason || '' }, proxyReasonWords(q.reason))
          : q.fenced ? h('span.st-warn.small', 'result came after its lease: recorded, never delivered') : ''),
      },
    ], calls, { empty: 'no proxied call yet', rowClass: (q) => (q.state === 'rejected' ? 'warn' : null) }),
    j.hasMore ? h('p.small.muted', `the first ${calls.length} of ${j.seen} calls are shown`) : null);
}
