// views/asks.js: pending asks counting down to their deadline, then the answered and timed-out ones.

import { h } from '../dom.js';
import { clock, countdown } from '../format.js';
import { pill, table, pastNote } from '../widgets.js';

export function drawAsks(v, d) {
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
