// route.js: the view the address's fragment names (#/runs, #/health, #/run/ID/TAB), pure.

/**
 * route reads hash (location.hash) as {name: 'runs' | 'health'} or {name: 'run', runId, tab}. Anything else names
 * the runs, a part that is not percent-encoding too: anyone may link to the page with a fragment of their choosing,
 * and one that decodeURIComponent refuses would otherwise leave the page loading for ever.
 */
export function route(hash) {
  const [path] = hash.replace(/^#\/?/, '').split('?');
  let parts;
  try {
    parts = path.split('/').map(decodeURIComponent);
  } catch {
    return { name: 'runs' };
  }
  if (parts[0] === 'run' && parts[1]) return { name: 'run', runId: parts[1], tab: parts[2] || 'tree' };
  if (parts[0] === 'health') return { name: 'health' };
  return { name: 'runs' };
}
