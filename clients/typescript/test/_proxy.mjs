// A unix-socket proxy between a client and crewd that sees every frame both ways and can drop one, kill the
// connection instead of forwarding one, or inject frames: the faults a test needs, forced rather than hoped for.
import { createConnection, createServer } from "node:net";
import { join } from "node:path";

/**
 * hooks.server(frame, session) and hooks.client(frame, session) return "forward" (default), "drop", "kill" (close
 * both sides without forwarding), or an array of frames to send on instead of this one.
 */
export async function startProxy(upstreamPath, dir, hooks = {}) {
  const path = join(dir, "proxy.sock");
  const sessions = [];
  const server = createServer((down) => {
    const up = createConnection(upstreamPath);
    const session = {
      n: sessions.length,
      requests: [],
      killed: false,
      kill() {
        session.killed = true;
        down.destroy();
        up.destroy();
      },
      // pause stops reading from crewd, so what crewd writes to this connection backs up behind it.
      pause: () => up.pause(),
      resume: () => up.resume(),
    };
    sessions.push(session);
    pipe(down, up, (f) => {
      if (typeof f.method === "string") session.requests.push(f);
      return hooks.client?.(f, session);
    }, session);
    pipe(up, down, (f) => hooks.server?.(f, session), session);
    down.on("error", () => up.destroy());
    up.on("error", () => down.destroy());
    down.on("close", () => up.destroy());
    up.on("close", () => down.destroy());
  });
  await new Promise((resolve) => server.listen(path, resolve));
  return {
    path,
    sessions,
    close: () => new Promise((resolve) => {
      for (const s of sessions) s.kill();
      server.close(resolve);
    }),
  };
}

function pipe(from, to, hook, session) {
  let buf = "";
  from.setEncoding("utf8");
  from.on("data", (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (session.killed) return;
      const action = hook(JSON.parse(line)) ?? "forward";
      if (action === "drop") continue;
      if (action === "kill") return session.kill();
      const out = Array.isArray(action) ? action.map((f) => JSON.stringify(f)) : [line];
      for (const l of out) to.write(l + "\n");
    }
  });
}
