// api.js: the dashboard API (docs/dashboard-api.md) as functions. The page is
// served by crewd on the same origin and authenticates with its session
// cookie and the session's proof, so every request is same-origin with credentials.

import { retryAfterMs, withRetry } from './retry.js';

const base = '/api/v1';

// The session cookie alone does not authenticate: a browser sends it to every port of the host, a worker's server
// on another one too. The login's redirect hands the page the session's proof in its fragment, which no server is
// sent; the page keeps it in its origin's localStorage, which pages of other ports cannot read, and sends it with
// every request (the stream: in its URL, as EventSource sends no header of its own).
const proofKey = 'crewlog.proof';
const storage = () => (typeof localStorage === 'undefined' ? null : localStorage);

/**
 * keepProof keeps the session's proof from a login's fragment (#proof=…), and says whether hash was one. Any page
 * may open this one with a fragment of its choosing, a worker's on another port too: the proof is kept only if
 * crewd takes it with this browser's session cookie (an answer only an authenticated read gets: 2xx, or 429; a 503
 * while crewd stops and a 403 for the Host come before authentication), so a wrong one cannot sign the page out.
 */
export async function keepProof(hash) {
  const m = /^#proof=([A-Za-z0-9_-]{1,256})$/.exec(hash);
  if (!m) return false;
  const res = await fetch(`${base}/slots`, {
    credentials: 'same-origin', headers: { Accept: 'application/json', 'X-Crewlog-Proof': m[1] },
  });
  const s = storage();
  if (s && (res.ok || res.status === 429)) s.setItem(proofKey, m[1]);
  return true;
}

function proof() {
  const s = storage();
  return (s && s.getItem(proofKey)) || '';
}

/**
 * ApiError carries the API's {error:{code,message}}, the HTTP status, the
 * Retry-After in milliseconds (null without one) and the base of crewd's
 * login links, its X-Crewlog-Login (null without one), which the hint of a
 * page signed out names.
 */
export class ApiError extends Error {
  constructor(status, code, message, retryAfter = null, loginBase = null) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
    this.retryAfterMs = retryAfter;
    this.loginBase = loginBase;
  }
}

/**
 * reads is how get waits before reading a refused read again (retry.js):
 * wait(ms, signal), random(), and onBackoff(n), told how many reads are
 * waiting to be read again each time that changes (the header's notice).
 */
export const reads = { wait: sleep, random: Math.random, onBackoff: () => {} };
let backingOff = 0;

/**
 * get fetches a JSON route; params are added as query parameters (arrays
 * repeat). A read crewd refused for now (429 too-many-reads, or
 * too-many-rebuilds for state?at and explain) is read again after a jittered
 * wait, a few times, before it fails (retry.js); onWait(true) and
 * onWait(false) tell when such a wait starts and ends, and signal aborts it
 * as it aborts the fetch.
 */
export async function get(path, params = {}, { signal, onWait } = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
  }
  const url = base + path + (q.size ? `?${q}` : '');
  return withRetry(() => getOnce(url, signal), { wait: (ms) => backOff(ms, signal, onWait), random: () => reads.random() });
}

async function getOnce(url, signal) {
  const headers = { Accept: 'application/json' };
  const p = proof();
  if (p) headers['X-Crewlog-Proof'] = p;
  const res = await fetch(url, { credentials: 'same-origin', headers, signal });
  let body = null;
  try {
    body = await res.json();
  } catch {
    // a non-JSON answer (a proxy's page): reported by status below
  }
  if (!res.ok) {
    const e = body && body.error;
    throw new ApiError(res.status, e && e.code, e && e.message, retryAfterMs(res.headers.get('Retry-After'), Date.now()),
      res.headers.get('X-Crewlog-Login'));
  }
  return body;
}

async function backOff(ms, signal, onWait) {
  reads.onBackoff(++backingOff);
  if (onWait) onWait(true);
  try {
    await reads.wait(ms, signal);
  } finally {
    if (onWait) onWait(false);
    reads.onBackoff(--backingOff);
  }
}

/** sleep resolves after ms, or rejects with the signal's reason once it aborts. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) {
      reject(signal.reason);
      return;
    }
    const abort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      if (signal) signal.removeEventListener('abort', abort);
      resolve();
    }, ms);
    if (signal) signal.addEventListener('abort', abort, { once: true });
  });
}

const run = (id) => `/runs/${encodeURIComponent(id)}`;

/**
 * maxRunEvents bounds the events a run view holds: its first read stops there, and the stream's events then push
 * out the oldest, so a run that goes on for days cannot grow the page until the tab dies.
 */
export const maxRunEvents = 50000;

/**
 * all pages through a list route until it ends or max items were read, and
 * returns {items, truncated, total}. key is the list's field ("tasks", ...).
 */
export async function all(path, key, params = {}, { max = 20000, signal, onPage } = {}) {
  const items = [];
  let cursor;
  let total;
  for (;;) {
    // NB: no more than max still wants: a page may end early (its bytes), so a fixed limit could pass max.
    const page = await get(path, { ...params, limit: Math.min(1000, max - items.length), cursor }, { signal });
    items.push(...(page[key] || []));
    total = page.total ?? total;
    if (onPage) onPage(items, page);
    if (!page.hasMore || !page.nextCursor) return { items, truncated: false, total };
    if (items.length >= max) return { items, truncated: true, total };
    cursor = page.nextCursor;
  }
}

/**
 * jobDetails reads a run's jobs (at most 64) and each one's first page of proxied calls: {items: [job…]}, each
 * GET …/jobs/{jobId}'s answer.
 */
async function jobDetails(id, opts = {}) {
  const list = await all(`${run(id)}/jobs`, 'jobs', {}, opts);
  const items = await Promise.all(list.items.map((j) =>
    get(`${run(id)}/jobs/${encodeURIComponent(j.jobId)}`, { limit: 500 }, opts)));
  return { items, truncated: list.truncated, total: list.total };
}

export const api = {
  runs: (params, opts) => get('/runs', params, opts),
  run: (id, opts) => get(run(id), {}, opts),
  tasks: (id, opts) => all(`${run(id)}/tasks`, 'tasks', {}, opts),
  delegations: (id, opts) => all(`${run(id)}/delegations`, 'delegations', {}, opts),
  ledger: (id, opts) => all(`${run(id)}/ledger`, 'accounts', {}, opts),
  ledgerHistory: (id, taskId, opts) => get(`${run(id)}/ledger`, { taskId, limit: 1000 }, opts),
  mailbox: (id, taskId, opts) => all(`${run(id)}/mailbox`, 'messages', { taskId }, { max: 2000, ...opts }),
  asks: (id, opts) => all(`${run(id)}/asks`, 'asks', {}, opts),
  jobs: (id, opts) => jobDetails(id, opts),
  credentials: (id, opts) => all(`${run(id)}/credentials`, 'credentials', {}, opts),
  events: (id, after, opts) => all(`${run(id)}/events`, 'events', { cursor: after || undefined }, { max: maxRunEvents, ...opts }),
  stateAt: (id, at, opts) => get(`${run(id)}/state`, { at }, opts),
  slots: (opts) => get('/slots', {}, opts),
  explain: (position, opts) => get(`/events/${encodeURIComponent(position)}/explain`, {}, opts),
};

/**
 * Stream follows /api/v1/stream with EventSource. onEvent gets every
 * TeamEvent (by position, never twice); onResync is called when the server
 * ended the stream with a resync, because this page read too slowly or
 * because crewd stopped following the log after an error: the views must be
 * re-read, and the stream is reopened live (after a failure crewd refuses
 * it with a 503, and the page shows offline). onState reports 'live',
 * 'connecting' or 'offline'; onHello each (re)connection, after which every
 * event is delivered: a view reads what it may have missed before it.
 */
export class Stream {
  constructor({ onEvent, onResync, onState, onHello }) {
    this.onEvent = onEvent;
    this.onResync = onResync;
    this.onHello = onHello || (() => {});
    this.onState = onState || (() => {});
    this.last = 0;
    this.es = null;
  }

  open(after) {
    this.close();
    const q = new URLSearchParams();
    if (after) q.set('after', String(after));
    const p = proof();
    if (p) q.set('proof', p);
    const es = new EventSource(`${base}/stream${q.size ? `?${q}` : ''}`);
    this.es = es;
    this.onState('connecting');
    es.addEventListener('hello', (m) => {
      const hello = safeParse(m.data);
      if (hello && !this.last) this.last = hello.head || 0;
      this.onState('live');
      // Events committed between a view's first read and this hello reach no stream: views catch up.
      this.onHello();
    });
    es.addEventListener('resync', () => {
      // The server ends the stream after a resync; EventSource would reconnect
      // from its last id and fall behind again, so start over live instead.
      this.close();
      this.onResync();
      this.open();
    });
    es.onerror = () => this.onState(es.readyState === EventSource.CLOSED ? 'offline' : 'connecting');
    es.onmessage = (m) => this.deliver(m); // frames without an event name, should the server send one
    this.typed = (m) => this.deliver(m);
    for (const t of eventTypes) es.addEventListener(t, this.typed);
  }

  deliver(m) {
    const ev = safeParse(m.data);
    if (!ev || !ev.metadata) return;
    const pos = ev.metadata.position;
    if (pos <= this.last) return;
    this.last = pos;
    this.onEvent(ev);
  }

  close() {
    if (this.es) this.es.close();
    this.es = null;
  }
}

function safeParse(s) {
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
}

// The SSE event name is the event type, and EventSource only dispatches named
// events to listeners registered for that name: these are every type of
// package events (a test in this package keeps the list complete).
export const eventTypes = [
  'run.created', 'run.queued', 'run.planning', 'run.running', 'run.blocked', 'run.completed', 'run.failed',
  'run.cancelled', 'run.budget_warning', 'run.budget_abort', 'run.quota_exceeded',
  'task.created', 'task.started', 'task.completed', 'task.failed', 'task.cancelled', 'task.skipped',
  'task.needs_attention', 'task.retried', 'task.waiting', 'task.resumed', 'task.usage', 'task.budget_fair_share',
  'delegate.requested', 'delegate.admitted', 'delegate.rejected', 'delegate.spawned', 'delegate.completed',
  'delegate.failed', 'delegate.timed_out', 'delegate.cancel_requested', 'delegate.cancelled',
  'budget.reserved', 'budget.charged',
  'mailbox.appended', 'mailbox.delivered', 'mailbox.acknowledged', 'steer.pushed',
  'ask.requested', 'ask.answered', 'ask.timedout',
  'credential.issued', 'credential.revoked', 'engine.configured', 'store.migrated',
  'policy.action', 'foreign.imported', 'import.checkpoint',
  'job.created', 'job.status_changed', 'job.rejected', 'job.roots_reset', 'lease.opened', 'lease.cleared',
  'proxy.requested', 'proxy.rejected', 'proxy.completed', 'proxy.cancelled',
  'manifest.revalidated', 'manifest.revalidation_failed',
];
