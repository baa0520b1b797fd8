// Unit tests of static/js/route.js, the page's reading of its address's fragment; run by TestJavaScriptUnits
// (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { route } from '../static/js/route.js';

test('the fragment names the view, a run and its tab', () => {
  assert.deepEqual(route(''), { name: 'runs' });
  assert.deepEqual(route('#/runs'), { name: 'runs' });
  assert.deepEqual(route('#/health'), { name: 'health' });
  assert.deepEqual(route('#/run/team_1'), { name: 'run', runId: 'team_1', tab: 'tree' });
  assert.deepEqual(route('#/run/team_1/mailbox'), { name: 'run', runId: 'team_1', tab: 'mailbox' });
  assert.deepEqual(route('#/run/a%2Fb%20c/events?x=1'), { name: 'run', runId: 'a/b c', tab: 'events' });
  assert.deepEqual(route('#/nowhere'), { name: 'runs' });
});

test('a fragment that is not percent-encoding shows the runs, never throws', () => {
  // Anyone may link to the page with a fragment of their choosing (a worker's page, a message's text the operator
  // opens): one decodeURIComponent refuses must not leave the page loading for ever.
  for (const hash of ['#/run/%', '#/run/%E0%A4%A', '#/run/team_1/%zz', '#/%', '#/run/%ED%A0%80']) {
    assert.deepEqual(route(hash), { name: 'runs' }, hash);
  }
});
