// main.js: the page shell: routing (#/runs, #/health, #/run/ID/TAB), the
// live stream shared by every view, the header's slot gauge, the theme and
// the keyboard.

import { h, replace } from './dom.js';
import { api, ApiError, keepProof, reads, Stream } from './api.js';
import { loginLinkHint } from './format.js';
import { coalesce } from './live.js';
import { route as routeOf } from './route.js';
import { moveRow, showDialog } from './widgets.js';
import { RunsView } from './views/runs.js';
import { RunView } from './views/run.js';
import { HealthView } from './views/health.js';

// A login lands on /#proof=…: the proof is kept, and leaves the address bar and the history.
try {
  if (await keepProof(location.hash)) history.replaceState(null, '', '#/runs');
} catch (err) {
  console.warn('keeping the login failed:', err);
}

const main = document.getElementById('view');
const liveEl = document.getElementById('live');
const slotsMini = document.getElementById('slots-mini');
const busyEl = document.getElementById('busy');
let view = null;

// A read crewd refused for now is read again shortly (api.js); meanwhile the header says so, and the view waits.
reads.onBackoff = (n) => {
  busyEl.hidden = n === 0;
  busyEl.textContent = n === 0 ? '' : 'busy, reading again…';
  busyEl.title = n === 0 ? '' : `crewd asked this page to wait: this credential's requests or past-state rebuilds fill its turns (${n} read${n === 1 ? '' : 's'} waiting)`;
};

// Theme: the system's preference unless the toggle chose one (kept in localStorage).
const themeKey = 'crewlog.theme';
function applyTheme(t) {
  if (t === 'light' || t === 'dark') document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}
function toggleTheme() {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  const next = dark ? 'light' : 'dark';
  localStorage.setItem(themeKey, next);
  applyTheme(next);
}
applyTheme(localStorage.getItem(themeKey));
document.getElementById('theme').addEventListener('click', toggleTheme);
document.getElementById('help').addEventListener('click', help);

// The live stream: one EventSource for the whole page; the current view gets every event.
const stream = new Stream({
  onEvent: (ev) => {
    if (ev.type.startsWith('delegate.') || ev.type === 'engine.configured') refreshSlots();
    if (view && view.onEvent) view.onEvent(ev);
  },
  onResync: () => {
    refreshSlots();
    if (view && view.onResync) view.onResync();
  },
  onHello: () => {
    if (view && view.onConnected) view.onConnected();
  },
  onState: (state) => {
    liveEl.dataset.state = state;
    liveEl.textContent = state === 'live' ? 'live' : state === 'connecting' ? 'reconnecting…' : 'offline';
    // EventSource gives up on an HTTP error without saying which; a restarted crewd forgot its sessions, so ask
    // the API whether this page is still signed in.
    if (state === 'offline') api.slots().catch(signedOut);
  },
});

const refreshSlots = coalesce(async () => {
  const s = await api.slots();
  slotsMini.textContent = `slots ${s.held}/${s.capacity}`;
  slotsMini.title = `slot pool: ${s.held} of ${s.capacity} held`;
  if (view && view.onSlots) view.onSlots(s);
}, 300);

const route = () => routeOf(location.hash);

let current = null;
async function render() {
  const r = route();
  // Tabs of the same run keep the run view (and its time-travel position).
  if (view && current && r.name === 'run' && current.name === 'run' && current.runId === r.runId) {
    current = r;
    view.showTab(r.tab);
    return;
  }
  if (view && view.destroy) view.destroy();
  current = r;
  for (const a of document.querySelectorAll('[data-nav-top]')) {
    if (a.dataset.navTop === r.name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const ctx = { go, stream, signedOut };
  view = r.name === 'run' ? new RunView(ctx, r.runId, r.tab) : r.name === 'health' ? new HealthView(ctx) : new RunsView(ctx);
  replace(main, h('p.loading', 'loading…'));
  try {
    await view.mount(main);
  } catch (err) {
    if (!signedOut(err)) replace(main, h('p.notice.bad', `Could not load this view: ${err.message}`));
  }
}

function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

/** signedOut shows the sign-in hint when err is the API's 401, and says whether it was. */
function signedOut(err) {
  if (!(err instanceof ApiError) || err.status !== 401) return false;
  stream.close();
  // NB: the address crewd's links name (an https proxy's, --http-public-url), never a plain http://… of the page's.
  const { link, printed } = loginLinkHint(err.loginBase, location.origin);
  replace(main, h('div.notice.warn',
    h('h1', 'Not signed in'),
    h('p', 'Open the one-time login link crewd printed when it started (',
      h('code', printed ? `crewd: dashboard ${link}` : link),
      printed ? ', valid 10 minutes' : ': its path and query at this address, valid 10 minutes',
      '), or get a fresh one with ', h('code', 'crewctl dashboard'), ', which asks crewd through its socket.')));
  return true;
}

// Keyboard. Keys are ignored while typing in a field, except Escape.
let prefix = null;
document.addEventListener('keydown', (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const typing = e.target.closest('input, textarea, select') && e.target.type !== 'range';
  if (typing) {
    if (e.key === 'Escape') e.target.blur();
    return;
  }
  if (prefix === 'g') {
    prefix = null;
    if (e.key === 'r') return go('#/runs');
    if (e.key === 'h') return go('#/health');
  }
  if (view && view.onKey && view.onKey(e)) {
    e.preventDefault();
    return;
  }
  switch (e.key) {
    case 'g':
      prefix = 'g';
      setTimeout(() => { prefix = null; }, 1500);
      return;
    case '/': {
      const search = main.querySelector('[data-search]');
      if (search) {
        e.preventDefault();
        search.focus();
      }
      return;
    }
    case 'j':
    case 'ArrowDown':
      if (e.target.type === 'range') return;
      e.preventDefault();
      return moveRow(1);
    case 'k':
    case 'ArrowUp':
      if (e.target.type === 'range') return;
      e.preventDefault();
      return moveRow(-1);
    case 't':
      return toggleTheme();
    case '?':
      return help();
    case 'Escape':
      if (route().name === 'run' && !document.querySelector('dialog[open]')) go('#/runs');
  }
});

function help() {
  const keys = [
    ['g r', 'runs'], ['g h', 'health'], ['/', 'search'], ['j / k, ↓ / ↑', 'next / previous row'],
    ['Enter', 'open the row'], ['1 … 8', 'run view tabs'], ['[ / ]', 'time travel: one event back / forward (with Shift: ten)'],
    ['l', 'back to live'], ['Esc', 'close / back to runs'], ['t', 'light / dark'], ['?', 'this help'],
  ];
  showDialog('Keyboard', h('dl.kv', keys.map(([k, v]) => [h('dt', h('kbd', k)), h('dd', v)])));
}

window.addEventListener('hashchange', render);
stream.open();
refreshSlots.now();
render();
