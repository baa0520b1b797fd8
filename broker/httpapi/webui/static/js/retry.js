// retry.js: reading again a read crewd refused for now. A credential has 4
// reads in progress and 8 waiting at most; beyond, crewd answers 429
// too-many-reads with a Retry-After (docs/dashboard-api.md, Turns). That
// passes as soon as the credential's other reads are answered, so the page
// waits a little and reads again instead of showing an error. A past state
// (state?at, explain) is rebuilt one at a time in all of crewd and a
// credential has 4 in progress or waiting at most; beyond, 429
// too-many-rebuilds with a Retry-After that reckons how long the rebuilds
// ahead take (Rebuilds): the page waits that long, asks again twice at most,
// and a newer time-travel position asked meanwhile takes the waiting one's
// place (latestOnly). Pure: the waiting and the randomness are passed in.

/**
 * readRetry: at most 4 retries; before retry k (from 0) the page waits
 * between half and all of baseMs·2^k, so 125 ms to 2 s, and never less than
 * the server's Retry-After; a Retry-After beyond maxWaitMs is not waited for
 * (the read fails as it is).
 */
export const readRetry = Object.freeze({ retries: 4, baseMs: 250, maxWaitMs: 30000 });

/**
 * rebuildRetry: the same rule for a 429 too-many-rebuilds, slower and
 * shorter: at most 2 retries, after 1–2 s then 2–4 s and never less than the
 * Retry-After; one beyond 10 s is not waited for (the view shows the
 * refusal, which says when to try again). Asking again sooner would only be
 * refused again: a rebuild takes up to hundreds of ms, one at a time.
 */
export const rebuildRetry = Object.freeze({ retries: 2, baseMs: 2000, maxWaitMs: 10000 });

const policies = Object.freeze({ 'too-many-reads': readRetry, 'too-many-rebuilds': rebuildRetry });

/** policyOf is the retry policy of a failed read: a 429 too-many-reads or too-many-rebuilds has one; null for anything else. */
export function policyOf(err) {
  return Boolean(err) && err.status === 429 && Object.hasOwn(policies, err.code) ? policies[err.code] : null;
}

/** transient says whether a failed read is worth reading again: a 429 too-many-reads or too-many-rebuilds, nothing else. */
export function transient(err) {
  return policyOf(err) !== null;
}

/**
 * retryAfterMs reads a Retry-After header (delay-seconds or an HTTP date) as
 * milliseconds from nowMs; null when it is absent or unreadable.
 */
export function retryAfterMs(value, nowMs) {
  if (value === null || value === undefined) return null;
  const v = String(value).trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  if (!/GMT$/.test(v)) return null;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/**
 * retryDelay is how long to wait before retry number attempt (0 for the
 * first) of a read that failed with err, or null to give up: err is not
 * transient, the retries of its policy (policyOf) are spent, or the server
 * asks for a wait longer than the policy's maxWaitMs. The wait is jittered by
 * random() (in [0, 1)), so reads refused together do not come back together.
 */
export function retryDelay(attempt, err, random, policy = policyOf(err)) {
  if (!transient(err) || !policy || attempt >= policy.retries) return null;
  const after = err.retryAfterMs ?? 0;
  if (after > policy.maxWaitMs) return null;
  const window = policy.baseMs * 2 ** attempt;
  return Math.max(after, window / 2) + random() * (window / 2);
}

/**
 * withRetry settles as read() does, except that a transient failure is read
 * again after wait(ms) (which may reject: the read was abandoned), as long as
 * retryDelay allows, each refusal's retries counted apart; then the last
 * failure is thrown.
 */
export async function withRetry(read, { wait, random = Math.random }) {
  const retried = new Map(); // code → retries so far
  for (;;) {
    try {
      return await read();
    } catch (err) {
      const attempt = retried.get(err && err.code) ?? 0;
      const ms = retryDelay(attempt, err, random);
      if (ms === null) throw err;
      retried.set(err.code, attempt + 1);
      await wait(ms);
    }
  }
}

/**
 * latestOnly reads the latest target asked for, one read at a time, with
 * read(target, {signal, onWait}); show(answer, target) gets only the answer
 * of the latest target asked, fail(err, target) only its failure. A target
 * asked while a read is at crewd waits for its answer (crewd rebuilds it
 * anyway, and asking more at once is what crewd refuses) and replaces any
 * target asked before it. But a target asked while the read waits to be
 * retried (read tells onWait(true), then onWait(false)) aborts that wait
 * through signal and is read at once: nothing is pending at crewd, and the
 * slider must not wait seconds for a position already left. cancel() drops
 * the target asked for, and a retry's wait with it.
 */
export function latestOnly(read, { show, fail }) {
  let seq = 0; // the latest ask (or cancel)
  let current = null; // the read in progress: {ctl, waiting}
  let next = null; // {target, seq}: the latest target asked while current was at crewd
  const run = async (target, mine) => {
    const cur = { ctl: new AbortController(), waiting: false };
    current = cur;
    try {
      const answer = await read(target, { signal: cur.ctl.signal, onWait: (w) => { cur.waiting = w; } });
      if (mine === seq) show(answer, target);
    } catch (err) {
      if (mine === seq) fail(err, target);
    } finally {
      current = null;
      const n = next;
      next = null;
      if (n && n.seq === seq) run(n.target, n.seq);
    }
  };
  const abortWait = () => {
    if (current && current.waiting) current.ctl.abort();
  };
  return {
    ask(target) {
      const mine = ++seq;
      if (!current) {
        run(target, mine);
        return;
      }
      next = { target, seq: mine };
      abortWait();
    },
    cancel() {
      seq++;
      next = null;
      abortWait();
    },
  };
}
