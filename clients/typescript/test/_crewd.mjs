// Builds crewd (go build, once per test process; CREWD_BIN skips it) and runs it on a temporary data directory
// and socket, for tests against the real daemon.
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

let built;

/** The path of a crewd binary: $CREWD_BIN, or one built from this repository into a temporary directory. */
export function crewdBinary() {
  if (process.env.CREWD_BIN) return Promise.resolve(process.env.CREWD_BIN);
  built ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), "crewd-bin-"));
    const bin = join(dir, "crewd");
    await promisify(execFile)("go", ["build", "-o", bin, "./cmd/crewd"], { cwd: repoRoot });
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    return bin;
  })();
  return built;
}

// What the tests and the example need switched on: crewd starts fail-closed, as pi-crew ships.
export const crewFlags = ["--nesting", "--max-depth=3", "--wait-methods", "--max-slots=8"];

/**
 * Starts crewd and resolves once it prints its socket line (the sign it accepts connections). start() again on the
 * returned daemon restarts it on the same data directory and socket.
 */
export async function startCrewd(flags = crewFlags) {
  const bin = await crewdBinary();
  const root = mkdtempSync(join(tmpdir(), "crewd-"));
  const d = {
    root,
    dataDir: join(root, "data"),
    socketPath: join(root, "run", "crewd.sock"),
    proc: null,
    stderr: "",
    get adminToken() {
      return readFileSync(join(this.dataDir, "admin.token"), "utf8").trim();
    },
    async start() {
      const args = ["--data", this.dataDir, "--socket", this.socketPath, "--http", "", "--min-free-mib", "0", ...flags];
      const proc = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
      this.proc = proc;
      proc.stderr.setEncoding("utf8");
      proc.stderr.on("data", (s) => (this.stderr += s));
      const exited = new Promise((resolve) => proc.once("exit", (code, signal) => resolve({ code, signal })));
      this.exited = exited;
      await new Promise((resolve, reject) => {
        const lines = createInterface({ input: proc.stdout });
        lines.on("line", (line) => {
          if (line.startsWith("crewd: socket ")) resolve();
        });
        exited.then(({ code }) => reject(new Error(`crewd exited ${code} before serving:\n${this.stderr}`)));
      });
    },
    /** Stops crewd (SIGTERM, or SIGKILL with kill) and waits for it to exit. */
    async stop(signal = "SIGTERM") {
      if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
      this.proc.kill(signal);
      await this.exited;
    },
    async close() {
      await this.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
  await d.start();
  return d;
}
