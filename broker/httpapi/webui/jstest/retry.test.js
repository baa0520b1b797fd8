// Unit tests of static/js/retry.js, and of api.js's get reading again a read crewd refused for now, against a
// fake fetch; run by TestJavaScriptUnits (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { latestOnly, readRetry, rebuildRetry, retryAfterMs, retryDelay, transient, withRetry } from '../static/js/retry.js';
import { ApiError, api, get, reads } from '../static/js/api.js';

const tooManyReads = (after = null) => new ApiError(429, 'too-many-reads', '4 in progress, 8 waiting', after);
const tooManyRebuilds = (after = null) => new ApiError(429, 'too-many-rebuilds', '4 rebuilds in progress or waiting', after);

test('only a 429 too-many-reads or too-many-rebuilds is transient', () => {
  assert.equal(transient(tooManyReads()), true);
  assert.equal(transient(tooManyRebuilds()), true);
  for (const err of [
    new ApiError(429, 'too-many-streams'), new ApiError(429), new ApiError(500, 'internal'), new ApiError(503, 'too-many-rebuilds'),
    new ApiError(429, 'constructor'), new ApiError(401, 'auth'), new ApiError(503), new TypeError('Failed to fetch'), null, undefined,
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
  assert.equal(retryDelay(0, new ApiError(429, 'too-many-streams', '', 1000), () => 0), null);
});

test('retryDelay waits out a too-many-rebuilds Retry-After, jittered past it, twice at most, and not one beyond 10 s', () => {
  assert.equal(rebuildRetry.retries, 2);
  for (const [attempt, after, least, most] of [
    [0, null, 1000, 2000], [1, null, 2000, 4000], // no Retry-After: 1–2 s, then 2–4 s
    [0, 1000, 1000, 2000], [1, 1000, 2000, 4000], // crewd's least: the windows are longer
    [0, 3000, 3000, 4000], [1, 3000, 3000, 5000], // crewd reckons 3 s: never sooner
    [0, rebuildRetry.maxWaitMs, rebuildRetry.maxWaitMs, rebuildRetry.maxWaitMs + 1000],
  ]) {
    assert.equal(retryDelay(attempt, tooManyRebuilds(after), () => 0), least, `attempt ${attempt}, Retry-After ${after}: least`);
    const top = retryDelay(attempt, tooManyRebuilds(after), () => 0.999999);
    assert.ok(top > least && top < most, `attempt ${attempt}, Retry-After ${after}: ${top} jittered below ${most}`);
  }
  assert.equal(retryDelay(rebuildRetry.retries, tooManyRebuilds(1000), () => 0), null, 'the retries are spent');
  assert.equal(retryDelay(0, tooManyRebuilds(rebuildRetry.maxWaitMs + 1000), () => 0), null, 'too long to wait: the view says so');
});

test('withRetry counts the retries of each refusal apart', async () => {
  const refusals = [tooManyRebuilds(1000), tooManyReads(), tooManyRebuilds(1000), tooManyReads(), tooManyRebuilds(1000)];
  const waits = [];
  let calls = 0;
  await assert.rejects(withRetry(async () => { throw refusals[calls++]; }, {
    wait: async (ms) => { waits.push(ms); }, random: () => 0,
  }), (err) => err === refusals[4]);
  assert.equal(calls, 5, 'two rebuild retries and two read retries, then the third rebuild refusal stands');
  assert.deepEqual(waits, [1000, 125, 2000, 250]);
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

test('a 401 carries the base of crewd\'s login links, its X-Crewlog-Login, for the hint of a page signed out', async () => {
  reads.wait = async () => {};
  reads.onBackoff = () => {};
  const signedOut = { error: { code: 'auth', message: 'no credential' } };
  fakeFetch([[401, signedOut, { 'X-Crewlog-Login': 'https://crew.example.com' }]]);
  await assert.rejects(get('/runs'), (err) => err instanceof ApiError && err.status === 401 &&
    err.loginBase === 'https://crew.example.com');
  fakeFetch([[401, signedOut, {}]]);
  await assert.rejects(get('/runs'), (err) => err instanceof ApiError && err.status === 401 && err.loginBase === null);
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

const rebuildRefusal = { error: { code: 'too-many-rebuilds', message: '4 rebuilds of this credential are in progress or waiting; try again in 3 s' } };

test('get reads a state?at refused with 429 too-many-rebuilds again after its Retry-After, twice at most', async () => {
  const waits = [];
  reads.wait = async (ms) => { waits.push(ms); };
  reads.random = () => 0;
  reads.onBackoff = () => {};
  const urls = fakeFetch([
    [429, rebuildRefusal, { 'Retry-After': '3' }],
    [429, rebuildRefusal, { 'Retry-After': '1' }],
    [200, { position: 7 }, {}],
  ]);
  assert.deepEqual(await api.stateAt('R1', 7), { position: 7 });
  assert.deepEqual(urls, Array(3).fill('/api/v1/runs/R1/state?at=7'));
  assert.deepEqual(waits, [3000, 2000], 'no sooner than crewd said, nor than the policy');

  waits.length = 0;
  fakeFetch(Array.from({ length: rebuildRetry.retries + 1 }, () => [429, rebuildRefusal, { 'Retry-After': '1' }]));
  await assert.rejects(api.explain(9), (err) => err.code === 'too-many-rebuilds' && err.message === rebuildRefusal.error.message);
  assert.equal(waits.length, rebuildRetry.retries);

  waits.length = 0;
  fakeFetch([[429, rebuildRefusal, { 'Retry-After': '60' }]]);
  await assert.rejects(api.stateAt('R1', 7), (err) => err.code === 'too-many-rebuilds');
  assert.deepEqual(waits, [], 'a wait beyond the policy is not waited: the refusal shows at once');
});

// settle lets every promise chain waiting on what already happened run.
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

// travel is a time-travel bar's reads: latestOnly over api.stateAt, recording what it shows and fails.
function travel() {
  const shown = [];
  const failed = [];
  const t = latestOnly((at, opts) => api.stateAt('R1', at, opts), {
    show: (st, at) => shown.push([at, st.position]),
    fail: (err, at) => failed.push([at, err.code || err.name]),
  });
  return { t, shown, failed };
}

// pendingFetch answers each request when the test says: answer(status, body, headers) settles the oldest.
function pendingFetch() {
  const queue = [];
  const urls = [];
  globalThis.fetch = (url, { signal } = {}) => new Promise((resolve, reject) => {
    urls.push(url);
    queue.push((status, body, headers = {}) => resolve(new Response(JSON.stringify(body), {
      status, headers: { 'Content-Type': 'application/json', ...headers },
    })));
    if (signal) signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
  return { urls, answer: (...a) => queue.shift()(...a) };
}

// waitUntilAborted is a retry's wait that lasts until its read is abandoned.
const waitUntilAborted = (ms, signal) => new Promise((_, reject) => {
  signal.addEventListener('abort', () => reject(signal.reason), { once: true });
});

test('a position asked while a refused one waits to be asked again replaces it at once', async () => {
  reads.wait = waitUntilAborted;
  reads.random = () => 0;
  const backoffs = [];
  reads.onBackoff = (n) => backoffs.push(n);
  const { urls, answer } = pendingFetch();
  const { t, shown, failed } = travel();
  t.ask(5);
  await settle();
  answer(429, rebuildRefusal, { 'Retry-After': '3' });
  await settle();
  assert.deepEqual(backoffs, [1], 'position 5 waits 3 s to be asked again');
  t.ask(6); // the slider moved on
  await settle();
  assert.deepEqual(urls, ['/api/v1/runs/R1/state?at=5', '/api/v1/runs/R1/state?at=6'], 'position 6 is asked now, 5 no more');
  assert.deepEqual(backoffs, [1, 0]);
  answer(200, { position: 6 });
  await settle();
  assert.deepEqual(shown, [[6, 6]]);
  assert.deepEqual(failed, [], 'the abandoned read is no failure');
});

test('a position asked while one is at crewd waits for its answer, and only the latest is asked and shown', async () => {
  reads.wait = waitUntilAborted;
  const { urls, answer } = pendingFetch();
  const { t, shown, failed } = travel();
  t.ask(5);
  await settle();
  t.ask(6);
  t.ask(7);
  await settle();
  assert.deepEqual(urls, ['/api/v1/runs/R1/state?at=5'], 'one rebuild at a time: crewd is working on 5');
  answer(200, { position: 5 });
  await settle();
  assert.deepEqual(urls, ['/api/v1/runs/R1/state?at=5', '/api/v1/runs/R1/state?at=7'], '6 was passed over');
  answer(200, { position: 7 });
  await settle();
  assert.deepEqual(shown, [[7, 7]], 'a superseded answer is not shown');
  assert.deepEqual(failed, []);
});

test('cancel drops the answer on its way and a read waiting to be asked again', async () => {
  reads.wait = waitUntilAborted;
  reads.onBackoff = () => {};
  const { urls, answer } = pendingFetch();
  const { t, shown, failed } = travel();
  t.ask(5);
  await settle();
  t.cancel(); // back to live
  answer(200, { position: 5 });
  await settle();
  assert.deepEqual(shown, []);

  t.ask(6);
  await settle();
  answer(429, rebuildRefusal, { 'Retry-After': '1' });
  await settle();
  t.cancel();
  await settle();
  assert.deepEqual(urls, ['/api/v1/runs/R1/state?at=5', '/api/v1/runs/R1/state?at=6'], 'the waiting read is not asked again');
  assert.deepEqual(shown, []);
  assert.deepEqual(failed, []);

  t.ask(7); // and the bar travels again
  await settle();
  answer(200, { position: 7 });
  await settle();
  assert.deepEqual(shown, [[7, 7]]);
});

test('the latest position refused for good shows its refusal', async () => {
  reads.wait = async () => {};
  const { answer } = pendingFetch();
  const { t, shown, failed } = travel();
  t.ask(5);
  for (let i = 0; i <= rebuildRetry.retries; i++) {
    await settle();
    answer(429, rebuildRefusal, { 'Retry-After': '1' });
  }
  await settle();
  assert.deepEqual(shown, []);
  assert.deepEqual(failed, [[5, 'too-many-rebuilds']]);
});
