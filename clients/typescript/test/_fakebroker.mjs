// Fake brokers for the tests of the client against a broker that misbehaves: unix sockets served by hand, each in a
// directory of its own removed with the test.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

// listen serves a unix socket in a directory of its own, each connection to onSocket, for the test's length.
export async function listen(t, onSocket) {
  const dir = mkdtempSync(join(tmpdir(), "crewlog-fake-"));
  const path = join(dir, "b.sock");
  const server = createServer(onSocket);
  await new Promise((resolve) => server.listen(path, resolve));
  t.after(() => {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return path;
}

// serveEvery hands every request of each connection, its hello too, to onRequest, with send, which writes a frame,
// the socket and the connection's number (from 1). The connections end with the test, so that one the client left
// open does not keep the test process alive.
export function serveEvery(t, onRequest) {
  let conns = 0;
  const socks = new Set();
  t.after(() => socks.forEach((sock) => sock.destroy()));
  return listen(t, (sock) => {
    const n = ++conns;
    socks.add(sock);
    let buf = "";
    const send = (frame) => sock.write(JSON.stringify(frame) + "\n");
    sock.setEncoding("utf8");
    sock.on("error", () => {});
    sock.on("data", (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0 && !sock.destroyed) {
        const req = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        onRequest(req, send, sock, n);
      }
    });
  });
}

// serveRequests answers the hello on each connection and hands every other request to onRequest, with send, which
// writes a frame.
export function serveRequests(t, onRequest) {
  return serveEvery(t, (req, send, sock) => {
    if (req.method === "hello") send({ id: "hello", result: { ok: true } });
    else onRequest(req, send, sock);
  });
}

// fakeBroker answers the hello, then answers every request with the line answer() gives.
export function fakeBroker(t, answer) {
  return serveRequests(t, (req, _send, sock) => sock.write(answer(req) + "\n"));
}
