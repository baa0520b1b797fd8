// Unit tests of static/js/retry.js, and of api.js's get reading again a read crewd refused for now, against a
// fake fetch; run by TestJavaScriptUnits (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readRetry, retryAfterMs, retryDelay, transient, withRetry } from '../static/js/retry.js';
import { ApiError, get, reads } from '../static/js/api.js';

const tooManyReads = (after = null) => new ApiError(429, 'too-many-reads', '4 in progress, 8 waiting', after);

test('only a 429 too-many-reads is transient', () => {
  assert.equal(transient(tooManyReads()), true);
  for (const err of [
    new ApiError(429, 'too-many-streams'), new ApiError(429, 'too-many-rebuilds'), new ApiError(500, 'internal'),
    new ApiError(401, 'auth'), new ApiError(503), new TypeError('Failed to fetch'), null, undefined,
  ]) {
    assert.equal(transient(err), false, String(err && err.message));
  }
});

test('retryAfterMs reads delay-seconds and HTTP dates, nothing else', () => {
  const now = Date.parse('Thu, 03 Dec 2026 04:00:00 GMT');
  for (const [value, want] of [
    ['1', 1000], ['0', 0], [' 2 ', 2000], ['120', 120000],
    ['Thu, 03 Dec 2026 04:00:05 GMT', 5000], ['Thu, 03 Dec 2026 03:59:00 GMT', 0],
    [null, null], [undefined, null], ['', null], ['-1', null], ['1.5', null], ['soon', null], ['2026-12-03', null],
  ]) {
    assert.equal(retryAfterMs(value, now), want, `Retry-After ${JSON.stringify(value)}`);
  }
});

test('retryDelay doubles a jittered window, and gives up after the retries', () => {
  const windows = [250, 500, 1000, 2000];
  assert.equal(windows.length, readRetry.retries);
  for (const [attempt, window] of windows.entries()) {
    assert.equal(retryDelay(attempt, tooManyReads(), () => 0), window / 2, `attempt ${attempt}, least`);
    assert.equal(retryDelay(attempt, tooManyReads(), () => 0.5), window * 0.75, `attempt ${attempt}, middle`);
    assert.ok(retryDelay(attempt, tooManyReads(), () => 0.999999) < window, `attempt ${attempt}, most`);
  }
  assert.equal(retryDelay(readRetry.retries, tooManyReads(), () => 0), null, 'the retries are spent');
});

test('retryDelay waits no less than the Retry-After, jittered past it, and not at all for one too long', () => {
  for (const attempt of [0, 1, 2, 3]) {
    const least = retryDelay(attempt, tooManyReads(1000), () => 0);
    const most = retryDelay(attempt, tooManyReads(1000), () => 0.999999);
    assert.equal(least, Math.max(1000, readRetry.baseMs * 2 ** attempt / 2));
    assert.ok(most > least, `attempt ${attempt}: reads refused together come back apart`);
  }
  assert.equal(retryDelay(0, tooManyReads(readRetry.maxWaitMs), () => 0), readRetry.maxWaitMs);
  assert.equal(retryDelay(0, tooManyReads(readRetry.maxWaitMs + 1000), () => 0), null);
});

test('retryDelay never retries what is not transient', () => {
  assert.equal(retryDelay(0, new ApiError(404, 'not-found'), () => 0), null);
  assert.equal(retryDelay(0, new ApiError(429, 'too-many-rebuilds', '', 1000), () => 0), null);
});

test('withRetry reads again after each transient refusal, and throws the last once the retries are spent', async () => {
  const waits = [];
  const wait = async (ms) => { waits.push(ms); };
  let calls = 0;
  const got = await withRetry(async () => {
    if (++calls <= 2) throw tooManyReads(1000);
    return 'page';
  }, { wait, random: () => 0 });
  assert.equal(got, 'page');
  assert.equal(calls, 3);
  assert.deepEqual(waits, [1000, 1000]);

  waits.length = 0;
  calls = 0;
  const last = tooManyReads();
  await assert.rejects(withRetry(async () => {
    calls++;
    throw calls > readRetry.retries ? last : tooManyReads();
  }, { wait, random: () => 0 }), (err) => err === last);
  assert.equal(calls, readRetry.retries + 1);
  assert.deepEqual(waits, [125, 250, 500, 1000]);

  waits.length = 0;
  const notFound = new ApiError(404, 'not-found');
  await assert.rejects(withRetry(async () => { throw notFound; }, { wait }), (err) => err === notFound);
  assert.deepEqual(waits, [], 'no wait for a failure that stays');

  const abandoned = new Error('abandoned');
  calls = 0;
  await assert.rejects(withRetry(async () => { calls++; throw tooManyReads(); }, {
    wait: async () => { throw abandoned; },
  }), (err) => err === abandoned);
  assert.equal(calls, 1, 'an abandoned wait reads no more');
});

// fakeFetch answers each request with the next of answers ([status, body, headers]) and records the URLs.
function fakeFetch(answers) {
  const urls = [];
  globalThis.fetch = async (url) => {
    urls.push(url);
    const [status, body, headers] = answers.shift();
    return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
  };
  return urls;
}

const refusal = { error: { code: 'too-many-reads', message: '4 requests of this credential are in progress and 8 waiting' } };

test('get reads a read refused with 429 too-many-reads again, honouring Retry-After, and tells the notice', async () => {
  const urls = fakeFetch([
    [429, refusal, { 'Retry-After': '1' }],
    [429, refusal, {}],
    [200, { held: 1, capacity: 4 }, {}],
  ]);
  const waits = [];
  const backoffs = [];
  reads.wait = async (ms) => { waits.push(ms); };
  reads.random = () => 0;
  reads.onBackoff = (n) => backoffs.push(n);
  const got = await get('/slots');
  assert.deepEqual(got, { held: 1, capacity: 4 });
  assert.deepEqual(urls, ['/api/v1/slots', '/api/v1/slots', '/api/v1/slots']);
  assert.deepEqual(waits, [1000, 250], 'the Retry-After first, the jittered window without one');
  assert.deepEqual(backoffs, [1, 0, 1, 0], 'the notice shows while a read waits, and goes');
});

test('get fails at once on another error, and with the refusal once the retries are spent', async () => {
  reads.wait = async () => {};
  reads.random = () => 0;
  const backoffs = [];
  reads.onBackoff = (n) => backoffs.push(n);
  fakeFetch([[429, { error: { code: 'too-many-streams', message: 'no' } }, { 'Retry-After': '1' }]]);
  await assert.rejects(get('/runs'), (err) => err instanceof ApiError && err.code === 'too-many-streams' && err.retryAfterMs === 1000);
  assert.deepEqual(backoffs, []);

  const urls = fakeFetch(Array.from({ length: readRetry.retries + 1 }, () => [429, refusal, { 'Retry-After': '1' }]));
  await assert.rejects(get('/runs'), (err) => err instanceof ApiError && err.status === 429 && err.code === 'too-many-reads');
  assert.equal(urls.length, readRetry.retries + 1);
  assert.equal(backoffs.at(-1), 0, 'no notice left once the read failed');
});
