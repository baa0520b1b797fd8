// format.js: pure formatting, no DOM, so node --test can check it.

/** duration renders milliseconds as "850 ms", "12.4 s", "3 m 05 s", "2 h 10 m", "3 d 4 h". */
export function duration(ms) {
  if (!Number.isFinite(ms)) return '–';
  const neg = ms < 0;
  ms = Math.abs(ms);
  let s;
  if (ms < 1000) s = `${Math.round(ms)} ms`;
  else if (ms < 60_000) s = `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  else if (ms < 3_600_000) {
    const m = Math.floor(ms / 60_000);
    s = `${m} m ${String(Math.floor((ms % 60_000) / 1000)).padStart(2, '0')} s`;
  } else if (ms < 86_400_000) {
    s = `${Math.floor(ms / 3_600_000)} h ${Math.floor((ms % 3_600_000) / 60_000)} m`;
  } else {
    s = `${Math.floor(ms / 86_400_000)} d ${Math.floor((ms % 86_400_000) / 3_600_000)} h`;
  }
  return neg ? `-${s}` : s;
}

/** age is how long ago a unix-ms time was, relative to now. */
export function age(at, now = Date.now()) {
  if (!at) return '–';
  return duration(Math.max(0, now - at));
}

/** countdown is the time left until a deadline: "in 4 m 10 s" or "overdue 12 s". */
export function countdown(deadline, now = Date.now()) {
  if (!deadline) return '–';
  const left = deadline - now;
  return left >= 0 ? `in ${duration(left)}` : `overdue ${duration(-left)}`;
}

/** tokens renders a token count compactly: 950, 12.5k, 3.2M. */
export function tokens(n) {
  if (n === null || n === undefined || !Number.isFinite(Number(n))) return '–';
  n = Number(n);
  const a = Math.abs(n);
  if (a < 10_000) return String(n);
  if (a < 1_000_000) return `${(n / 1000).toFixed(a < 100_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(a < 100_000_000 ? 1 : 0)}M`;
}

/** clock renders a unix-ms time as local HH:MM:SS (with the date when not today). */
export function clock(at, now = Date.now()) {
  if (!at) return '–';
  const d = new Date(at);
  const t = d.toLocaleTimeString([], { hour12: false });
  return new Date(now).toDateString() === d.toDateString() ? t : `${d.toISOString().slice(0, 10)} ${t}`;
}

/** parseTime reads the API's times: unix ms numbers or ISO strings. */
export function parseTime(v) {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v) {
    const t = Date.parse(v);
    return Number.isNaN(t) ? 0 : t;
  }
  return 0;
}

const terminalRun = new Set(['completed', 'failed', 'cancelled']);
const terminalTask = new Set(['completed', 'failed', 'cancelled', 'skipped']);
const terminalDelegation = new Set(['completed', 'failed', 'timed_out', 'cancelled']);

export const isTerminalRun = (st) => terminalRun.has(st);
export const isTerminalTask = (st) => terminalTask.has(st);
export const isTerminalDelegation = (st) => terminalDelegation.has(st);

/**
 * policyWords explains a rejection in a sentence from the inputs the admission
 * policy recorded (events.Policy). Missing inputs fall back to the recorded
 * message, then to the reason code itself.
 */
export function policyWords(reason, policy, message) {
  const p = policy || {};
  const known = policy !== undefined && policy !== null;
  switch (reason) {
    case 'nesting-disabled':
      return 'Delegation is switched off: the engine ran with nesting disabled.';
    case 'no-task':
      return 'The parent task does not exist in this run.';
    case 'parent-not-running':
      return known && p.parentStatus && p.parentStatus !== 'running'
        ? `The parent task was ${p.parentStatus}, not running.`
        : 'The parent task (or its run) was no longer running.';
    case 'role-denied':
      return `Role ${quote(p.role)} may not be delegated to (allowed: explorer, analyst, executor).`;
    case 'trust-denied':
      return 'The request came from an untrusted escalation context.';
    case 'depth-exceeded':
      return known
        ? `The child would sit at depth ${p.childDepth}, deeper than the maximum of ${p.maxDepth} (parent at depth ${p.depth}).`
        : fallback(reason, message);
    case 'slots-exhausted':
      return known
        ? `All ${p.capacity} delegation slots were in use (${p.held} of ${p.capacity} held).`
        : fallback(reason, message);
    case 'slot-share-exceeded':
      return known
        ? `The run already held ${p.runHeld} slot(s), its share of ${p.slotShare}, while ${p.waiting} other run(s) waited for one (${p.held} of ${p.capacity} held).`
        : fallback(reason, message);
    case 'budget-insufficient': {
      if (!known) return fallback(reason, message);
      const nested = p.budgetMode === 'nested';
      const left = p.granted - p.spent;
      const had = left > 0 ? `${left} left` : 'nothing left';
      let s = `It asked for ${p.requested} tokens but the parent had ${had} (granted ${p.granted}, spent ${p.spent}).`;
      if (nested && p.runPool) s += ` In nested budget mode the run's pool was ${p.runPool} with ${p.runSpent} spent.`;
      return s;
    }
    case 'unmetered-denied':
      return 'There was no budget to meter it against, and unmetered delegations are denied by configuration.';
    case 'model-invalid':
      return known && p.catalogSize === 0
        ? `Model ${quote(p.model)} was asked for, but the model catalog is empty, so no explicit model is allowed.`
        : `Model ${quote(p.model)} is not in the model catalog${known && p.catalogSize > 0 ? ` of ${p.catalogSize}` : ''}.`;
    case 'timeout-invalid':
      return `The timeout of ${known ? p.timeoutSec : '?'} s is outside 1 … 86400 s.`;
    case 'workspace-conflict':
      return known
        ? `${p.overlapping} running executor task(s) share the same working directory and serializeOnPathOverlap is off.`
        : fallback(reason, message);
    default:
      return fallback(reason, message);
  }
}

function quote(s) {
  return s ? `“${s}”` : '(none)';
}

function fallback(reason, message) {
  return message || reason || 'no reason recorded';
}

/** policyInputs lists the recorded inputs as label/value pairs, in words. */
export function policyInputs(policy) {
  if (!policy) return [];
  const p = policy;
  const out = [];
  const add = (label, value) => out.push([label, value]);
  add('nesting', p.nestingEnabled ? 'enabled' : 'disabled');
  if (p.parentStatus) add('parent status', p.parentStatus);
  if (p.parentRole) add('parent role', p.parentRole);
  if (p.role) add('requested role', p.role);
  add('depth', `parent ${p.depth ?? '?'} → child ${p.childDepth ?? '?'} (max ${p.maxDepth ?? '?'})`);
  add('slots', `${p.held ?? '?'} of ${p.capacity ?? '?'} held`);
  if (p.waiting) add('slot share', `run holds ${p.runHeld}, share ${p.slotShare}, ${p.waiting} run(s) waiting`);
  // A refusal for a slot that a later check refuses as well: the run did not wait for a slot.
  if (p.otherwise) add('with a slot free', `${p.otherwise}: the run does not wait for a slot`);
  add('budget', p.metered
    ? `metered: granted ${p.granted}, spent ${p.spent}, requested ${p.requested}`
    : `unmetered${p.unmeteredDelegates ? ` (unmeteredDelegates ${p.unmeteredDelegates})` : ''}`);
  if (p.budgetMode) add('budget mode', `${p.budgetMode}${p.runPool ? `, run pool ${p.runPool}, run spent ${p.runSpent}` : ''}`);
  if (p.model) add('model', `${p.model} (${p.catalogSize < 0 ? 'no catalog' : `catalog of ${p.catalogSize}`})`);
  if (p.timeoutSec) add('timeout', `${p.timeoutSec} s`);
  if (p.overlapping) add('workspace', `${p.overlapping} overlapping, serialize ${p.serializeOnPathOverlap ? 'on' : 'off'}`);
  add('trusted', p.trusted ? 'yes' : 'no');
  return out;
}

/** shortId shortens a delegation's gc-<uuid> to its first characters (the title attribute keeps it whole). */
export function shortId(id) {
  return id.startsWith('gc-') && id.length > 14 ? `${id.slice(0, 11)}…` : id;
}

/** middle shortens a long id by its middle, where generated ids (team_<time>_<random>) differ least. */
export function middle(s, max) {
  if (!s || s.length <= max) return s;
  const head = Math.ceil((max - 1) / 3);
  return `${s.slice(0, head)}…${s.slice(s.length - (max - 1 - head))}`;
}

/** matches is the run-list search: every whitespace-separated term must appear in one of the fields. */
export function matches(query, ...fields) {
  const hay = fields.filter((f) => f !== null && f !== undefined).join(' ').toLowerCase();
  return query.toLowerCase().split(/\s+/).filter(Boolean).every((term) => hay.includes(term));
}

// proxyReasons are proxy.rejected's reasons (docs/design-jobs.md) in words.
const proxyReasons = {
  nonce: 'the nonce is not this job’s',
  replay: 'this request id was used before',
  'request-limit': 'the job reached its limit of request ids',
  'no-lease': 'the job holds no lease',
  'not-running': 'the job is not running',
  'not-granted': 'the tool is not in the job’s grant',
  'in-flight': 'too many calls in flight',
  'payload-too-large': 'the arguments are too large',
  'revalidation-failed': 'the manager’s tools changed since the grant',
  'bad-request-id': 'the request id is missing or too long',
};

/** proxyReasonWords is a proxied call's rejection reason as a sentence (the code itself when unknown). */
export function proxyReasonWords(reason) {
  return proxyReasons[reason] || reason || 'rejected';
}

/**
 * loginLinkHint is the login link the hint of a page signed out shows: at
 * loginBase, the base of the links crewd hands out (its X-Crewlog-Login:
 * --http-public-url's, or crewd's own address), as crewd prints it
 * (printed); without one (the session cookie Secure and no public URL: the
 * links name crewd's plain-http address, where the browser keeps no Secure
 * cookie), at origin, the page's own, the proxy's https address where the
 * path and query of crewd's link are opened.
 */
export function loginLinkHint(loginBase, origin) {
  const printed = typeof loginBase === 'string' && /^https?:\/\/[^/?#\s]+$/.test(loginBase);
  return { link: `${printed ? loginBase : origin}/login?code=…`, printed };
}
