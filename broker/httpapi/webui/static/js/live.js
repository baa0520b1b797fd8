// live.js: keeping a view current without hammering the API.

/**
 * coalesce wraps an async refresh so that bursts of live events cause at most
 * one refresh in flight and one queued after it, started no sooner than
 * delayMs after the first request of a burst, and no sooner than twice the
 * last refresh took: a big run that is slow to re-read is re-read less often,
 * so a busy crew never keeps the page (or crewd) re-reading back to back.
 * The returned function takes no arguments; .now() refreshes at once (still
 * never two at a time).
 */
export function coalesce(refresh, delayMs = 250) {
  let timer = null;
  let running = null;
  let again = false;
  let lastTook = 0;
  const start = async () => {
    timer = null;
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      const t0 = performance.now();
      try {
        await refresh();
      } catch (err) {
        console.warn('refresh failed:', err);
      } finally {
        lastTook = performance.now() - t0;
        running = null;
        if (again) {
          again = false;
          schedule();
        }
      }
    })();
    return running;
  };
  const schedule = () => {
    if (!timer) timer = setTimeout(start, Math.max(delayMs, 2 * lastTook));
  };
  schedule.now = () => {
    if (timer) clearTimeout(timer);
    return start();
  };
  schedule.cancel = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    again = false;
  };
  return schedule;
}

/** ticker calls fn every second while the page is visible (countdowns, ages). */
export function ticker(fn) {
  const id = setInterval(() => {
    if (!document.hidden) fn();
  }, 1000);
  return () => clearInterval(id);
}

/**
 * background runs a read nobody awaits (a catch-up, a tab's first read): a failure is logged, never left as an
 * unhandled rejection; the next live refresh or reconnect reads again.
 */
export function background(promise, what) {
  promise.catch((err) => console.warn(`${what} failed:`, err));
}
