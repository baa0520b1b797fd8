// retry.js: reading again a read crewd refused for now. A credential has 4
// reads in progress and 8 waiting at most; beyond, crewd answers 429
// too-many-reads with a Retry-After (docs/dashboard-api.md, Turns). That
// passes as soon as the credential's other reads are answered, so the page
// waits a little and reads again instead of showing an error. Pure: the
// waiting and the randomness are passed in.

/**
 * readRetry: at most 4 retries; before retry k (from 0) the page waits
 * between half and all of baseMs·2^k, so 125 ms to 2 s, and never less than
 * the server's Retry-After; a Retry-After beyond maxWaitMs is not waited for
 * (the read fails as it is).
 */
export const readRetry = Object.freeze({ retries: 4, baseMs: 250, maxWaitMs: 30000 });

/** transient says whether a failed read is worth reading again: a 429 too-many-reads, nothing else. */
export function transient(err) {
  return Boolean(err) && err.status === 429 && err.code === 'too-many-reads';
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
 * transient, the retries are spent, or the server asks for a wait longer than
 * policy.maxWaitMs. The wait is jittered by random() (in [0, 1)), so reads
 * refused together do not come back together.
 */
export function retryDelay(attempt, err, random, policy = readRetry) {
  if (!transient(err) || attempt >= policy.retries) return null;
  const after = err.retryAfterMs ?? 0;
  if (after > policy.maxWaitMs) return null;
  const window = policy.baseMs * 2 ** attempt;
  return Math.max(after, window / 2) + random() * (window / 2);
}

/**
 * withRetry settles as read() does, except that a transient failure is read
 * again after wait(ms) (which may reject: the read was abandoned), as long as
 * retryDelay allows; then the last failure is thrown.
 */
export async function withRetry(read, { wait, random = Math.random, policy = readRetry }) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      const ms = retryDelay(attempt, err, random, policy);
      if (ms === null) throw err;
      await wait(ms);
    }
  }
}
