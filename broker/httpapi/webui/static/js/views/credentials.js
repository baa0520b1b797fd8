// views/credentials.js: credentials: issued and revoked by whom, and which are still valid on a terminal task.

import { h } from '../dom.js';
import { clock, isTerminalTask } from '../format.js';
import { pill, table } from '../widgets.js';

export function drawCredentials(v, d) {
  const cols = [
    { label: 'key', cell: (c) => h('span.mono', c.key) },
    { label: 'role', cell: (c) => c.role },
    { label: 'issued', class: 'nowrap', cell: (c) => `${clock(c.issuedAt)}${c.issuedBy ? ` by ${c.issuedBy}` : ''}` },
    { label: 'state', cell: (c) => (c.revoked ? pill('revoked') : pill('ok', 'valid')) },
    { label: 'revoked', class: 'nowrap', cell: (c) => (c.revoked ? `${clock(c.revokedAt)}${c.revokedBy ? ` by ${c.revokedBy}` : ''}` : '–') },
    { label: 'task status', cell: (c) => (c.taskStatus ? pill(c.taskStatus) : h('span.muted', '–')) },
    {
      label: '', cell: (c) => (!c.revoked && c.taskStatus && isTerminalTask(c.taskStatus)
        ? h('span.st-warn.small', 'still valid on a terminal task') : ''),
    },
  ];
  return h('div.panel',
    d.past ? h('p.muted.small', 'Credentials are shown live; they are not part of the time-travel view.') : null,
    h('p.small.muted', 'Digests never leave crewd; this is who was let in, by whom, and whether it still is.'),
    table(cols, d.credentials, { empty: 'no credential issued', rowClass: (c) => (!c.revoked && c.taskStatus && isTerminalTask(c.taskStatus) ? 'warn' : null) }));
}
