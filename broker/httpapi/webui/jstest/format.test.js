// Unit tests of static/js/format.js, run by TestJavaScriptUnits (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { duration, countdown, tokens, policyWords, policyInputs, matches, parseTime, middle, proxyReasonWords, loginLinkHint } from '../static/js/format.js';

test('duration picks a unit a person reads at a glance', () => {
  assert.equal(duration(850), '850 ms');
  assert.equal(duration(12_400), '12 s');
  assert.equal(duration(4_250), '4.3 s');
  assert.equal(duration(185_000), '3 m 05 s');
  assert.equal(duration(2 * 3_600_000 + 10 * 60_000), '2 h 10 m');
  assert.equal(duration(3 * 86_400_000 + 4 * 3_600_000), '3 d 4 h');
  assert.equal(duration(-1500), '-1.5 s');
  assert.equal(duration(NaN), '–');
});

test('countdown says overdue once the deadline passed', () => {
  assert.equal(countdown(10_000, 4_000), 'in 6.0 s');
  assert.equal(countdown(4_000, 10_000), 'overdue 6.0 s');
});

test('tokens compacts large counts', () => {
  assert.equal(tokens(950), '950');
  assert.equal(tokens(12_500), '12.5k');
  assert.equal(tokens(3_200_000), '3.2M');
  assert.equal(tokens(undefined), '–');
});

test('parseTime reads unix ms and ISO strings', () => {
  assert.equal(parseTime(1764590000000), 1764590000000);
  assert.equal(parseTime('2026-12-01T10:00:00.000Z'), Date.UTC(2026, 11, 1, 10));
  assert.equal(parseTime('nonsense'), 0);
  assert.equal(parseTime(undefined), 0);
});

test('policyWords explains each rejection from the recorded inputs', () => {
  assert.equal(policyWords('slots-exhausted', { held: 2, capacity: 2 }), 'All 2 delegation slots were in use (2 of 2 held).');
  assert.equal(policyWords('budget-insufficient', { granted: 1000, spent: 900, requested: 500 }),
    'It asked for 500 tokens but the parent had 100 left (granted 1000, spent 900).');
  assert.equal(policyWords('budget-insufficient', { granted: 1000, spent: 1200, requested: 5 }),
    'It asked for 5 tokens but the parent had nothing left (granted 1000, spent 1200).', 'charges may take spend past the grant');
  assert.equal(policyWords('depth-exceeded', { depth: 2, childDepth: 3, maxDepth: 2 }),
    'The child would sit at depth 3, deeper than the maximum of 2 (parent at depth 2).');
  assert.match(policyWords('slot-share-exceeded', { runHeld: 1, slotShare: 1, waiting: 2, held: 2, capacity: 2 }), /its share of 1, while 2 other run/);
  assert.match(policyWords('model-invalid', { model: 'x', catalogSize: 0 }), /catalog is empty/);
  assert.equal(policyWords('nesting-disabled', null), 'Delegation is switched off: the engine ran with nesting disabled.');
});

test('policyWords falls back to the recorded message, then the reason', () => {
  assert.equal(policyWords('slots-exhausted', null, 'no free slot'), 'no free slot');
  assert.equal(policyWords('something-new', null, ''), 'something-new');
});

test('policyInputs lists what the policy saw in words', () => {
  const got = Object.fromEntries(policyInputs({ nestingEnabled: true, depth: 1, childDepth: 2, maxDepth: 4, held: 1, capacity: 2,
    metered: true, granted: 100, spent: 40, requested: 10, catalogSize: -1 }));
  assert.equal(got.slots, '1 of 2 held');
  assert.equal(got.depth, 'parent 1 → child 2 (max 4)');
  assert.equal(got.budget, 'metered: granted 100, spent 40, requested 10');
  assert.deepEqual(policyInputs(undefined), []);
  const refused = Object.fromEntries(policyInputs({ held: 2, capacity: 2, otherwise: 'timeout-invalid' }));
  assert.equal(refused['with a slot free'], 'timeout-invalid: the run does not wait for a slot');
  assert.equal(got['with a slot free'], undefined);
});

test('matches needs every term somewhere', () => {
  assert.ok(matches('core ship', 'R1', 'core', 'ship it'));
  assert.ok(!matches('core nope', 'R1', 'core', 'ship it'));
  assert.ok(matches('', 'anything'));
});

test('middle keeps both ends of a long id', () => {
  assert.equal(middle('team_20261201103954_1a6bc707e09a42cc', 24), 'team_202…a6bc707e09a42cc');
  assert.equal(middle('short', 24), 'short');
  assert.equal(middle('team_20261201103954_1a6bc707e09a42cc', 24).length, 24);
});

test('proxyReasonWords says why a proxied call was refused', () => {
  assert.equal(proxyReasonWords('not-granted'), 'the tool is not in the job’s grant');
  assert.equal(proxyReasonWords('in-flight'), 'too many calls in flight');
  assert.equal(proxyReasonWords('something-new'), 'something-new');
});

test('loginLinkHint names the base of crewd\'s links, an https public URL\'s too, and the page\'s own without one', () => {
  const page = 'https://proxy.example.com';
  for (const [base, origin, want] of [
    ['https://crew.example.com', 'https://crew.example.com', { link: 'https://crew.example.com/login?code=…', printed: true }],
    ['https://crew.example.com:8443', page, { link: 'https://crew.example.com:8443/login?code=…', printed: true }],
    ['https://[fe80::7%25eth0]:8443', page, { link: 'https://[fe80::7%25eth0]:8443/login?code=…', printed: true }],
    ['http://127.0.0.1:7717', 'http://127.0.0.1:7717', { link: 'http://127.0.0.1:7717/login?code=…', printed: true }],
    // No base: the Secure cookie without a public URL; the link's path and query are opened at the page's address.
    [null, page, { link: 'https://proxy.example.com/login?code=…', printed: false }],
    ['', page, { link: 'https://proxy.example.com/login?code=…', printed: false }],
    // Not a base crewd hands out (a proxy's rewrite): the page's own address, never text shaped as a link elsewhere.
    ['https://crew.example.com/login?code=x', page, { link: 'https://proxy.example.com/login?code=…', printed: false }],
    ['javascript:alert(1)', page, { link: 'https://proxy.example.com/login?code=…', printed: false }],
  ]) {
    assert.deepEqual(loginLinkHint(base, origin), want, `base ${base}`);
  }
});
