// The crewlog broker client: one unix-socket connection, many calls in flight, a subscription that resumes, and
// engine commands retried with the same commandId so that a lost answer is learned rather than the command done
// twice. The wire contract is docs/protocol.md; the method table is generated from docs/protocol.json.
import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { createConnection } from "node:net";

import { CODES, LIMITS, METHODS, PROTOCOL_VERSION } from "./protocol.js";

/** An error answered by the broker (its code and message) or found by the client (a local code). */
export class BrokerError extends Error {
  constructor(code, message, details = {}) {
    super(message || code);
    this.name = "BrokerError";
    this.code = code;
    if (details.method !== undefined) this.method = details.method;
    if (details.commandId !== undefined) this.commandId = details.commandId;
  }

  /** Whether the broker closes the connection after this code. */
  get closes() {
    return CODES[this.code]?.closes ?? false;
  }
}

// After these a new connection with the same credential cannot do better: the client stops.
const FATAL = new Set(["protocol", "auth", "stale-token", "revoked"]);
// After these another attempt to connect cannot do better either: a hello that does not fit in a frame is never sent.
const FINAL = new Set([...FATAL, "closed", "encode-failed"]);

// Methods that are neither engine commands (no commandId) nor safe to repeat: sent again after a lost answer, the
// second attempt fails for what the first one did (admin.checkpoint's dir exists then), so the call fails
// request-failed instead, its outcome unknown. Reads and import.append (each write carries its commandId) are resent.
const NOT_RESENT = new Set(["admin.checkpoint"]);

// task.waitStatus's timeoutMs as the broker reads it (docs/protocol.md): floored and clamped to 0..60000, and
// anything that is no finite number (JSON.stringify sends NaN and ±Infinity as null) 30000.
const DEFAULT_WAIT_MS = 30000;
const MAX_WAIT_MS = 60000;

const DEFAULT_BACKOFF_MS = Object.freeze([20, 50, 100, 200, 400, 800, 1600, 3200]);
const DEFAULT_CONNECT_TIMEOUT_MS = 5000;
// How long a call may wait for its answer unless it says otherwise: a broker that answered the hello and then never
// answers must not leave every call pending for good. A task.waitStatus, which the broker answers when its wait ends,
// waits that much after its wait; admin.checkpoint, whose copy of the store takes as long as the store is large, has
// no deadline unless its caller gives one.
const DEFAULT_CALL_TIMEOUT_MS = 60000;
const NO_DEFAULT_TIMEOUT = new Set(["admin.checkpoint"]);
// The longest wait setTimeout takes: a longer one it cuts to 1 ms.
const MAX_TIMER_MS = 2 ** 31 - 1;
const DEFAULT_HIGH_WATER_MARK = 10000;
// The bytes of events a subscription buffers for its iterator, as frames at maxFrame: at 10000 events of up to a frame
// each, a consumer that stops reading would otherwise hold gigabytes of a run whose workers write large messages.
const DEFAULT_HIGH_WATER_MARK_FRAMES = 64;
// The bytes of requests that may wait in the socket to be written, and apart from them for a connection, as frames at
// the default cap: a broker that stops reading, or is not there, must not make a caller that keeps calling hold
// everything it asked in memory.
const DEFAULT_MAX_QUEUED_FRAMES = 16;

// option is options[name], or fallback when it is absent; a value check refuses is a TypeError that names it.
function option(where, options, name, fallback, check, what) {
  const value = options[name];
  if (value === undefined) return fallback;
  if (!check(value)) throw new TypeError(`${where}: options.${name} must be ${what}`);
  return value;
}

const isPositiveInteger = (v) => Number.isSafeInteger(v) && v > 0;
const isFunction = (v) => typeof v === "function";
// isTimerMs is whether setTimeout waits v ms as given.
const isTimerMs = (v) => typeof v === "number" && v > 0 && v <= MAX_TIMER_MS;
const isTimeoutMs = (v) => isTimerMs(v) || v === Infinity;
const TIMEOUT_MS = "a number of ms (1 to 2³¹−1) or Infinity (none)";
// isParams is whether v may be a call's params: an object JSON writes as one (no array), or absent (undefined, null).
const isParams = (v) => v === undefined || v === null || (typeof v === "object" && !Array.isArray(v));
const describe = (v) => (Array.isArray(v) ? "an array" : `a ${typeof v}`);
// requestBytes is about the bytes of a request of method with params p as the client writes it (its id aside); 0 when
// JSON cannot write it (the call is refused encode-failed when sent).
function requestBytes(method, p) {
  try {
    return Buffer.byteLength(JSON.stringify({ id: "", method, params: p }) + "\n");
  } catch {
    return 0;
  }
}

// callListener calls a listener of the application and hands what it throws, or what the promise it returns rejects
// with, to failed: the client calls listeners from its socket's handlers, and an exception out of one would leave the
// frames after it in the read unread until the next read, and end the process as an uncaught exception.
function callListener(listener, thisArg, args, failed) {
  try {
    const result = listener.apply(thisArg, args);
    if (typeof result?.then === "function") result.then(undefined, failed);
  } catch (err) {
    failed(err);
  }
}

// warnListenerError is the default onListenerError: a process warning, which Node prints, the process going on. It
// says what the listener threw, and nothing of the client's (its credentials least of all).
function warnListenerError(err, source) {
  let what;
  try {
    what = err instanceof Error ? (err.stack ?? String(err)) : String(err);
  } catch {
    what = "a value that cannot be printed";
  }
  process.emitWarning(`the client's ${source} listener threw: ${what}`, "CrewClientListenerError");
}

/**
 * A client of one credential. Calls are multiplexed on one connection and matched by request id. When the
 * connection is lost, the client dials again (with backoff) as long as something is waiting: every call not yet
 * answered is sent again — an engine command with the same commandId, so the broker answers the recorded outcome
 * if the first attempt was decided; one that cannot be repeated (NOT_RESENT) fails request-failed instead; a
 * task.waitStatus with the time its caller has left — and the subscription resumes after the last event it delivered.
 */
export class CrewClient extends EventEmitter {
  #opts;
  #conn = null;
  #connecting = null;
  #dialing = null; // the connection whose hello is not answered yet
  #wake = null; // ends the wait between two attempts
  #closed = false;
  #fatal = null;
  #everConnected = false;
  #nextId = 0;
  #calls = new Set(); // calls not yet answered, in the order they were made
  #byId = new Map(); // request id on the current connection → call
  #unsentBytes = 0; // the bytes of the calls that wait for a connection to be sent on (call.unsent)
  #sub = null;
  hello = null;

  /** Connects and says hello; rejects with the broker's error (e.g. auth) or the socket's. */
  static async connect(options) {
    const c = new CrewClient(options);
    await c.#connect();
    return c;
  }

  constructor(options) {
    super();
    if (!options || typeof options.socketPath !== "string" || options.socketPath === "") {
      throw new TypeError("CrewClient: options.socketPath is required");
    }
    const cr = options.credentials;
    if (!cr || typeof cr.token !== "string" || !["worker", "orchestrator", "admin"].includes(cr.role)) {
      throw new TypeError("CrewClient: options.credentials needs a role (worker, orchestrator, admin) and a token");
    }
    if (cr.role !== "admin" && (typeof cr.runId !== "string" || (cr.role === "worker" && typeof cr.taskId !== "string"))) {
      throw new TypeError("CrewClient: a worker needs runId and taskId, an orchestrator runId");
    }
    // NB: a number option that is NaN compares false with everything: a NaN maxFrame or maxQueuedBytes would bound
    // nothing, a NaN timeout fire at once.
    const opt = (name, fallback, check, what) => option("CrewClient", options, name, fallback, check, what);
    const maxFrame = opt("maxFrame", LIMITS.defaultMaxFrame, isPositiveInteger, "a positive integer");
    this.#opts = {
      socketPath: options.socketPath,
      credentials: { ...cr },
      reconnect: opt("reconnect", true, (v) => typeof v === "boolean", "a boolean"),
      backoffMs: Object.freeze([...opt("backoffMs", DEFAULT_BACKOFF_MS,
        (v) => Array.isArray(v) && v.every((ms) => ms === 0 || isTimerMs(ms)), "an array of waits in ms (0 to 2³¹−1)")]),
      connectTimeoutMs: opt("connectTimeoutMs", DEFAULT_CONNECT_TIMEOUT_MS, isTimerMs, "a number of ms (1 to 2³¹−1)"),
      callTimeoutMs: opt("callTimeoutMs", DEFAULT_CALL_TIMEOUT_MS, isTimeoutMs, TIMEOUT_MS),
      maxFrame,
      maxQueuedBytes: opt("maxQueuedBytes", DEFAULT_MAX_QUEUED_FRAMES * maxFrame, isPositiveInteger, "a positive integer"),
      random: opt("random", Math.random, isFunction, "a function"),
      onListenerError: opt("onListenerError", warnListenerError, isFunction, "a function"),
    };
  }

  get role() {
    return this.#opts.credentials.role;
  }

  get connected() {
    return this.#conn !== null;
  }

  /** A fresh commandId (a random UUID). */
  newCommandId() {
    return randomUUID();
  }

  /**
   * Calls a method. An engine command gets a commandId (options.commandId, params.commandId or a new one), and
   * keeps it through every resend, so it is decided at most once; a rejection carries it (err.commandId) for a
   * later retry of your own (e.g. after disk-full).
   */
  call(method, params, options = {}) {
    const desc = Object.hasOwn(METHODS, method) ? METHODS[method] : undefined;
    if (!desc || method === "hello") {
      return Promise.reject(new BrokerError("bad-method", `method '${method}' is not a method this client may call`, { method }));
    }
    // NB: sent as a call, it would replace the connection's subscription (one per connection) with one whose
    // pushes nobody reads, and the client's subscription would wait for events that no longer come.
    if (method === "events.subscribe") {
      return Promise.reject(new BrokerError("bad-method", "events.subscribe: use subscribe(), which owns the connection's subscription", { method }));
    }
    if (!desc.roles.includes(this.role)) {
      return Promise.reject(new BrokerError("forbidden", `${method} is not for the ${this.role} role`, { method }));
    }
    let timeoutMs;
    try {
      timeoutMs = option("call", options, "timeoutMs", undefined, isTimeoutMs, TIMEOUT_MS);
    } catch (err) {
      return Promise.reject(err);
    }
    // NB: every method the broker serves reads its params as one JSON object: spread into a command's object, a
    // string would be sent as its characters' indexes, and a number or a boolean as no params at all.
    if (!isParams(params)) {
      return Promise.reject(new TypeError(`${method}: params must be an object (or absent), not ${describe(params)}`));
    }
    let p = params ?? {};
    let commandId;
    if (desc.command) {
      commandId = options.commandId ?? p.commandId ?? this.newCommandId();
      p = { ...p, commandId };
    }
    if (this.#closed) return Promise.reject(new BrokerError("closed", "client closed", { method, commandId }));
    if (this.#fatal) return Promise.reject(this.#failure(this.#fatal, method, commandId));
    return new Promise((resolve, reject) => {
      const call = { method, params: p, commandId, resolve, reject, id: null, timer: null, sent: false, unsent: false };
      if (method === "task.waitStatus") {
        const t = p.timeoutMs;
        call.waitMs = Number.isFinite(t) ? Math.min(Math.max(Math.floor(t), 0), MAX_WAIT_MS) : DEFAULT_WAIT_MS;
        call.deadline = performance.now() + call.waitMs;
        call.deadlineTimer = null;
      }
      // NB: the broker answers a wait when it ends: its default deadline is callTimeoutMs after that.
      timeoutMs ??= NO_DEFAULT_TIMEOUT.has(method) ? Infinity : (call.waitMs ?? 0) + this.#opts.callTimeoutMs;
      if (timeoutMs !== Infinity) {
        call.timer = setTimeout(() => {
          this.#settle(call);
          reject(new BrokerError("timeout", `${method}: no answer within ${timeoutMs} ms`, { method, commandId }));
        }, Math.min(timeoutMs, MAX_TIMER_MS));
      }
      const conn = this.#live();
      if (!conn) {
        // NB: what waits for a connection is bounded as what waits in the socket is: a caller that keeps calling while
        // the broker is down must not make the client hold all it asked.
        call.bytes = requestBytes(method, p);
        if (this.#unsentBytes + call.bytes > this.#opts.maxQueuedBytes) {
          this.#settle(call);
          reject(new BrokerError("busy", `${method}: ${this.#unsentBytes} bytes of requests already wait for a ` +
            `connection (maxQueuedBytes ${this.#opts.maxQueuedBytes})`, call));
          return;
        }
      }
      this.#calls.add(call);
      if (conn) this.#send(conn, call);
      else {
        this.#unsent(call, true);
        this.#awaitDeadline(call);
        // A connection closing (#live) connects again once closed (#down), which sends the call.
        if (!this.#conn) this.#connect().catch(() => {}); // the call is failed by #connect if connecting fails for good
      }
    });
  }

  /**
   * Subscribes to the run's events after sinceSeq (default 0): replay, then live. One subscription per client (a
   * new one replaces it, as on the wire). The subscription resumes after the last event it took when the
   * connection is lost, when the broker sends a resync frame, when it sees a gap in seq (without a type filter),
   * and when its buffer of events not yet read holds highWaterMark events or highWaterMarkBytes bytes (it stops
   * taking them, and picks up after the last it took once they are read), so it never skips or repeats an event.
   */
  subscribe(options = {}) {
    // NB: made before the subscription it replaces is closed: options it refuses leave that one as it was.
    const sub = new Subscription(options, DEFAULT_HIGH_WATER_MARK_FRAMES * this.#opts.maxFrame, (s) => this.#resubscribe(s), (s) => {
      if (this.#sub === s) this.#sub = null;
    }, (err) => this.#listenerFailed(err, "onEvent"));
    if (this.#sub) this.#sub.close();
    this.#sub = sub;
    if (this.#fatal) sub._end(this.#failure(this.#fatal, "events.subscribe"));
    else if (this.#closed) sub._end(new BrokerError("closed", "client closed"));
    else if (this.#conn) this.#resubscribe(sub);
    else this.#connect().catch(() => {});
    return sub;
  }

  /** Closes the connection; calls not yet answered are rejected with code closed. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    // The subscription ends as its own close() ends it, done; a lost connection (code closed too) is an error.
    this.#sub?._end(null);
    this.#failAll(new BrokerError("closed", "client closed"));
    // NB: an attempt in progress is ended too: its hello's timer or the wait before the next attempt would otherwise
    // keep the socket open, and the process alive, for up to connectTimeoutMs after close.
    this.#wake?.();
    const dialing = this.#dialing;
    const conn = this.#conn;
    this.#conn = null;
    await Promise.all([dialing?.destroy(), conn?.destroy()]);
    this.#emit("close");
  }

  // --- connecting ---

  // NB: #connecting is cleared before the calls waiting on an attempt that failed are rejected: a call made by their
  // rejection handlers (a retry) must start an attempt of its own, not wait on the one that is over.
  #connect() {
    if (this.#connecting) return this.#connecting;
    const attempt = this.#dialWithBackoff().then(
      () => {
        this.#connecting = null;
      },
      (err) => {
        this.#connecting = null;
        this.#failAll(err);
        throw err;
      },
    );
    this.#connecting = attempt;
    return attempt;
  }

  async #dialWithBackoff() {
    let last;
    const attempts = this.#everConnected && !this.#opts.reconnect ? 0 : this.#opts.backoffMs.length + 1;
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (this.#closed) throw new BrokerError("closed", "client closed");
      if (attempt > 0) await this.#sleep(this.#jittered(this.#opts.backoffMs[attempt - 1]));
      if (this.#closed) throw new BrokerError("closed", "client closed");
      try {
        const conn = await this.#dial();
        if (this.#closed) {
          await conn.destroy();
          throw new BrokerError("closed", "client closed");
        }
        this.#up(conn);
        return;
      } catch (err) {
        last = err instanceof BrokerError ? err : new BrokerError("socket-error", String(err?.message ?? err));
        if (FINAL.has(last.code)) break;
      }
    }
    last ??= new BrokerError("exhausted", "reconnect is off");
    if (FATAL.has(last.code)) this.#fatal = last;
    throw FINAL.has(last.code) ? last : new BrokerError("exhausted", `could not connect: ${last.message}`);
  }

  // #jittered is the wait of one backoff step: between half of it and all of it, at random, so that the clients of a
  // crewd that restarted do not all dial again at once, step after step; no wait is longer than its step.
  #jittered(step) {
    const r = this.#opts.random();
    return step / 2 + (step / 2) * (r >= 0 && r < 1 ? r : 1); // NB: NaN too is the whole step
  }

  #sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#wake(), ms);
      this.#wake = () => {
        clearTimeout(timer);
        this.#wake = null;
        resolve();
      };
    });
  }

  #dial() {
    return new Promise((resolve, reject) => {
      const socket = createConnection(this.#opts.socketPath);
      const conn = new Connection(socket, this.#opts.maxFrame);
      this.#dialing = conn;
      let done = false;
      const finish = (err, hello) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (this.#dialing === conn) this.#dialing = null;
        if (err) {
          conn.destroy();
          reject(err);
        } else {
          conn.hello = hello;
          resolve(conn);
        }
      };
      const timer = setTimeout(() => finish(new BrokerError("timeout", "no hello answer")), this.#opts.connectTimeoutMs);
      socket.once("connect", () => {
        const cr = this.#opts.credentials;
        const params = cr.role === "admin"
          ? { protocol: PROTOCOL_VERSION, role: "admin", token: cr.token }
          : { protocol: PROTOCOL_VERSION, runId: cr.runId, taskId: cr.role === "worker" ? cr.taskId : (cr.taskId ?? "orchestrator"), token: cr.token };
        const refused = conn.write({ id: "hello", method: "hello", params });
        if (refused === "too-large") {
          finish(new BrokerError("encode-failed", `hello: the credentials do not fit in a frame of ${this.#opts.maxFrame} bytes`, { method: "hello" }));
        } else if (refused === "not-json") {
          finish(new BrokerError("encode-failed", "hello: the credentials cannot be written as JSON", { method: "hello" }));
        }
      });
      conn.onFrame = (frame, bytes) => {
        if (done) return this.#onFrame(conn, frame, bytes);
        // NB: id "" answers no request: with an error it is the broker's refusal of the connection, and anything else
        // under it is no answer to the hello.
        if (frame.id !== "hello" && !(frame.id === "" && frame.error)) {
          return finish(new BrokerError("protocol", "a frame before the hello answer"));
        }
        if (frame.error) return finish(new BrokerError(frame.error.code, frame.error.message, { method: "hello" }));
        finish(null, frame.result);
      };
      conn.onClose = (err) => {
        if (!done) finish(conn.closeError ?? new BrokerError("socket-error", err ? err.message : "connection closed before hello"));
        else this.#down(conn, conn.closeError ?? new BrokerError("closed", err ? err.message : "connection closed"));
      };
    });
  }

  #up(conn) {
    this.#conn = conn;
    this.hello = conn.hello;
    const again = this.#everConnected;
    this.#everConnected = true;
    // NB: a frame read with the hello's answer may have closed the connection already (one over maxFrame): a call
    // sent there would be failed by #down among those that frame may answer, where it waits for the next connection.
    if (this.#live()) for (const call of this.#calls) this.#send(conn, call);
    if (this.#sub && !this.#sub.closed) this.#resubscribe(this.#sub);
    if (again) this.#emit("reconnect", conn.hello);
  }

  // #live is the connection requests may be written to: none while the current one is closing. NB: on a frame over
  // maxFrame, say, read in the same chunk as the answer whose handler makes a call or a subscription: #down counts
  // what went out on the connection among what that frame may have answered, so nothing made after it goes there.
  #live() {
    const conn = this.#conn;
    return conn && !conn.closing ? conn : null;
  }

  #down(conn, err) {
    if (this.#conn !== conn) return;
    this.#conn = null;
    this.#byId.clear();
    if (this.#closed) return;
    // NB: set before the disconnect listeners are called: a call one makes must fail with it, not dial again with a
    // credential that ended.
    if (FATAL.has(err.code)) this.#fatal = err;
    this.#emit("disconnect", err);
    if (this.#fatal) {
      this.#failAll(err);
      return;
    }
    if (conn.oversize) {
      // NB: which request the frame answered cannot be read from it, and sent again it would come back as large, the
      // client reconnecting without end: every call it may have answered, and the subscription, fail with it.
      this.#rejectCalls((call) => call.id !== null, () => err);
      if (this.#sub?._conn === conn) this.#sub._end(err);
    }
    if (!this.#opts.reconnect) {
      this.#failAll(new BrokerError("closed", `connection lost: ${err.message}`));
      return;
    }
    this.#rejectCalls((call) => call.id !== null && NOT_RESENT.has(call.method), (call) => new BrokerError("request-failed",
      `${call.method}: the connection was lost before the answer; it may have been done, and is not sent again: ${err.message}`));
    for (const call of this.#calls) {
      call.id = null; // the id of a connection that is gone: the call is not on the next one until sent there
      this.#unsent(call, true);
      this.#awaitDeadline(call);
    }
    if (this.#calls.size > 0 || (this.#sub && !this.#sub.closed)) this.#connect().catch(() => {});
  }

  // --- frames ---

  #send(conn, call) {
    let params = call.params;
    if (call.deadline !== undefined) {
      clearTimeout(call.deadlineTimer); // the broker times the wait while the connection lasts
      call.deadlineTimer = null;
      const left = call.deadline - performance.now();
      if (left <= 0 && (call.sent || call.waitMs > 0)) return this.#waitTimedOut(call);
      // NB: sent again after a lost connection, the wait gets the time its caller has left, not its whole timeoutMs
      // again: the broker times a wait from the request's arrival.
      params = { ...params, timeoutMs: Math.max(0, Math.ceil(left)) };
    }
    call.sent = true;
    this.#unsent(call, false);
    const id = String(++this.#nextId);
    call.id = id;
    this.#byId.set(id, call);
    const refused = conn.write({ id, method: call.method, params }, this.#opts.maxQueuedBytes);
    if (refused === "too-large") {
      this.#settle(call);
      call.reject(new BrokerError("encode-failed", `${call.method}: the request does not fit in a frame`, call));
    } else if (refused === "not-json") {
      this.#settle(call);
      call.reject(new BrokerError("encode-failed", `${call.method}: the params cannot be written as JSON ` +
        "(a BigInt, a cycle, a toJSON that throws)", call));
    } else if (refused === "queue-full") {
      this.#settle(call);
      call.reject(new BrokerError("busy", `${call.method}: ${conn.queued} bytes of requests already ` +
        `wait to be written (maxQueuedBytes ${this.#opts.maxQueuedBytes}): the broker is not reading them`, call));
    }
  }

  // #awaitDeadline fails a task.waitStatus call wait-timeout at its caller's deadline while no connection carries it
  // (the broker's timer would start again only once it is sent again). A wait of 0 never sent is a check of the
  // status, made once the client connects.
  #awaitDeadline(call) {
    if (call.deadline === undefined || call.deadlineTimer !== null || !(call.sent || call.waitMs > 0)) return;
    call.deadlineTimer = setTimeout(() => this.#waitTimedOut(call), Math.max(0, call.deadline - performance.now()));
  }

  // #waitTimedOut fails a task.waitStatus call with the broker's answer to a wait that timed out.
  #waitTimedOut(call) {
    this.#settle(call);
    call.reject(new BrokerError("wait-timeout", "wait timed out", call));
  }

  // #unsent marks whether call waits for a connection to be sent on, and counts its bytes among #unsentBytes then.
  // NB: a call a lost connection leaves unanswered counts again, over maxQueuedBytes if it must: it was taken.
  #unsent(call, waits) {
    if (call.unsent === waits) return;
    call.unsent = waits;
    call.bytes ??= requestBytes(call.method, call.params);
    this.#unsentBytes += waits ? call.bytes : -call.bytes;
  }

  #settle(call) {
    clearTimeout(call.timer);
    clearTimeout(call.deadlineTimer);
    this.#unsent(call, false);
    this.#calls.delete(call);
    if (call.id !== null) this.#byId.delete(call.id);
  }

  #onFrame(conn, frame, bytes) {
    if (typeof frame.event === "string") return this.#onPush(conn, frame, bytes);
    if (frame.id === "" && frame.error) {
      conn.closeError = new BrokerError(frame.error.code, frame.error.message);
      return;
    }
    // NB: a closing code answers a request too (a credential that ended while it was served): the close that follows
    // is for that reason, not a lost connection to dial again, which would say hello with a credential that ended.
    if (frame.error) {
      const err = new BrokerError(frame.error.code, frame.error.message);
      if (err.closes) conn.closeError ??= err;
    }
    const handler = this.#byId.get(frame.id);
    if (!handler) return;
    if (typeof handler === "function") {
      this.#byId.delete(frame.id);
      return handler(frame);
    }
    this.#settle(handler);
    if (frame.error) {
      handler.reject(new BrokerError(frame.error.code, frame.error.message, handler));
    } else {
      handler.resolve(frame.result);
    }
  }

  #onPush(conn, frame, bytes) {
    switch (frame.event) {
      case "team.event":
        if (this.#sub) this.#sub._push(frame.seq ?? frame.data?.metadata?.seq, frame.data, bytes);
        break;
      case "resync":
        if (this.#sub) this.#sub._resync(frame.data?.fromSeq);
        break;
      case "mailbox.message":
        this.#emit("mailbox", frame.data);
        break;
      default:
        this.#emit("push", frame);
    }
  }

  // #resubscribe (re)starts the subscription on the current connection from its last seq. Pushes are ignored
  // until the answer: the broker answers before the first push of the new subscription, so what arrives before it
  // belongs to the one it replaces.
  #resubscribe(sub) {
    const conn = this.#live();
    if (!conn || sub.closed) return;
    sub._conn = conn; // the connection it was last asked on (#down)
    const id = String(++this.#nextId);
    const params = { sinceSeq: sub._takenSeq };
    if (sub.types) params.types = sub.types;
    if (sub.runId) params.runId = sub.runId;
    sub._pending = id;
    this.#byId.set(id, (frame) => {
      if (sub._pending !== id) return;
      sub._pending = null;
      if (frame.error) {
        const err = new BrokerError(frame.error.code, frame.error.message, { method: "events.subscribe" });
        sub._end(err);
      }
    });
    // NB: a request that does not fit in a frame, or that JSON cannot write, is not sent, so no answer would ever end
    // the wait for one.
    const refused = conn.write({ id, method: "events.subscribe", params });
    if (refused !== null) {
      this.#byId.delete(id);
      sub._pending = null;
      const why = refused === "too-large" ? "does not fit in a frame" : "cannot be written as JSON";
      sub._end(new BrokerError("encode-failed", `events.subscribe: the request ${why}`, { method: "events.subscribe" }));
    }
  }

  // #emit calls each listener of event as emit() does, but one that throws or rejects is reported (#listenerFailed),
  // and the listeners after it are called.
  #emit(event, ...args) {
    for (const listener of this.rawListeners(event)) {
      callListener(listener, this, args, (err) => this.#listenerFailed(err, event));
    }
  }

  // #listenerFailed hands a listener's error to onListenerError. NB: what that throws in turn is warned of, not
  // thrown: thrown, it would be the exception this guards against.
  #listenerFailed(err, source) {
    try {
      this.#opts.onListenerError(err, source);
    } catch (again) {
      warnListenerError(again, "onListenerError");
    }
  }

  #failure(err, method, commandId) {
    return new BrokerError(err.code, err.message, { method, commandId });
  }

  #failAll(err) {
    this.#rejectCalls(() => true, () => err);
    if (this.#sub) this.#sub._end(err);
  }

  // #rejectCalls settles and rejects every call which picks, with the code and message of errOf(call) and the call's
  // method and commandId.
  #rejectCalls(which, errOf) {
    for (const call of [...this.#calls]) {
      if (!which(call)) continue;
      this.#settle(call);
      const err = errOf(call);
      call.reject(new BrokerError(err.code, err.message, call));
    }
  }
}

/**
 * The events of one subscription, as an async iterator (for await … of) and, with options.onEvent, a callback.
 * lastSeq is the seq of the last event handed over (returned by next() or passed to onEvent), or the sinceSeq it
 * started from: the cursor to subscribe again from. _takenSeq is the last one taken off the wire (buffered or handed
 * over), the cursor the subscription resumes from itself, its buffer being read first.
 */
export class Subscription {
  #queue = []; // {seq, event, bytes} taken and not yet read
  #queuedBytes = 0;
  #waiters = [];
  #resume;
  #detach;
  #onEvent;
  #listenerFailed;
  #hwm;
  #hwmBytes;
  #paused = false;
  #error = null;
  closed = false;
  resyncs = 0;
  _pending = null;
  _conn = null;

  constructor(options, defaultHighWaterMarkBytes, resume, detach, listenerFailed) {
    const since = options.sinceSeq ?? 0;
    if (!Number.isInteger(since) || since < 0) throw new TypeError("sinceSeq must be a non-negative integer");
    this.lastSeq = since;
    this._takenSeq = since;
    this.types = options.types;
    this.runId = options.runId;
    this.#onEvent = option("subscribe", options, "onEvent", undefined, isFunction, "a function");
    this.#listenerFailed = listenerFailed;
    // NB: NaN, say, would never be reached, and the events the iterator does not read would be kept without bound.
    this.#hwm = option("subscribe", options, "highWaterMark", DEFAULT_HIGH_WATER_MARK, isPositiveInteger, "a positive integer");
    this.#hwmBytes = option("subscribe", options, "highWaterMarkBytes", defaultHighWaterMarkBytes, isPositiveInteger, "a positive integer");
    this.#resume = resume;
    this.#detach = detach;
  }

  // _push takes the event of a team.event push of the given bytes, unless it was taken already, or the buffer is full:
  // then it and every later push are left to the broker until the buffer is read, and the subscription resumes after
  // the last event it took (#again, from next()).
  _push(seq, event, bytes = 0) {
    if (this.closed || this._pending !== null || this.#paused || typeof seq !== "number") return;
    if (seq <= this._takenSeq) return; // a replay of what was taken
    if (!this.types && seq !== this._takenSeq + 1) {
      this.#again(); // a gap: something was lost on the way
      return;
    }
    if (this.#waiters.length === 0 && !this.#onEvent && this.#queue.length > 0 && this.#queuedBytes + bytes > this.#hwmBytes) {
      // NB: one event is buffered however large, else one over the limit would never be delivered.
      this.#paused = true;
      return;
    }
    this._takenSeq = seq;
    if (this.#onEvent || this.#waiters.length > 0) { // handed over at once: nothing to buffer
      this.lastSeq = seq;
      if (this.#onEvent) callListener(this.#onEvent, undefined, [event], this.#listenerFailed);
      if (this.#waiters.length > 0) this.#waiters.shift().resolve({ value: event, done: false });
      return; // NB: a callback consumer does not also iterate: its events are not buffered
    }
    this.#queue.push({ seq, event, bytes });
    this.#queuedBytes += bytes;
    if (this.#queue.length >= this.#hwm || this.#queuedBytes >= this.#hwmBytes) this.#paused = true;
  }

  _resync() {
    // NB: while a re-subscribe waits for its answer, a resync is the replaced subscription's (the broker answers
    // before the new one's first frame): the replay asked for covers it, and another would be asked in a loop.
    if (this.closed || this._pending !== null) return;
    this.#again();
  }

  #again() {
    this.resyncs++;
    this.#resume(this);
  }

  _end(err) {
    if (this.closed) return;
    this.closed = true;
    this.#error = err ?? null;
    this.#detach(this);
    // NB: the error is delivered once, as next() delivers it: to the first next() that waits; the others, and every
    // later one, are done.
    for (const w of this.#waiters.splice(0)) {
      const first = this.#error;
      this.#error = null;
      if (first) w.reject(first);
      else w.resolve({ value: undefined, done: true });
    }
  }

  next() {
    if (this.#queue.length > 0) {
      const { seq, event, bytes } = this.#queue.shift();
      this.#queuedBytes -= bytes;
      this.lastSeq = seq;
      if (this.#paused && this.#queue.length === 0) {
        this.#paused = false;
        this.#again();
      }
      return Promise.resolve({ value: event, done: false });
    }
    if (this.closed) {
      if (this.#error) {
        const err = this.#error;
        this.#error = null;
        return Promise.reject(err);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  return() {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /** Stops delivering. The broker has no unsubscribe: the connection's subscription ends with it or a new one. */
  close() {
    this._end(null);
  }
}

// Connection is one socket after (or during) its hello: NDJSON in, NDJSON out.
class Connection {
  onFrame = () => {};
  onClose = () => {};
  closeError = null;
  /** Whether the broker sent a frame over maxFrame, which closed the connection. */
  oversize = false;
  hello = null;
  #socket;
  #buf = "";
  #maxFrame;
  #closed;

  constructor(socket, maxFrame) {
    this.#socket = socket;
    this.#maxFrame = maxFrame;
    socket.setEncoding("utf8");
    socket.on("data", (chunk) => this.#data(chunk));
    let error = null;
    // Close follows, with the error: its message (ENOENT, ECONNREFUSED, EACCES) is what a caller can act on.
    socket.on("error", (err) => (error ??= err));
    this.#closed = new Promise((resolve) => {
      socket.once("close", (hadError) => {
        this.onClose(hadError ? (error ?? new Error("socket error")) : null);
        resolve();
      });
    });
  }

  #data(chunk) {
    this.#buf += chunk;
    let nl;
    while ((nl = this.#buf.indexOf("\n")) >= 0) {
      const line = this.#buf.slice(0, nl);
      this.#buf = this.#buf.slice(nl + 1);
      const bytes = Buffer.byteLength(line) + 1;
      // Whether a frame over the cap is refused must not depend on how the socket cut the stream into reads.
      if (bytes > this.#maxFrame) return this.#oversize();
      if (line.trim() === "") continue;
      let frame;
      try {
        frame = JSON.parse(line);
      } catch {
        frame = undefined;
      }
      // A frame is one JSON object: anything else (null, a number, an array) is no answer to match or push to read.
      if (typeof frame !== "object" || frame === null || Array.isArray(frame)) {
        this.closeError = new BrokerError("protocol", "the broker sent a frame that is not a JSON object");
        this.#socket.destroy();
        return;
      }
      this.onFrame(frame, bytes);
    }
    // What waits for its newline is a frame of at least one byte more.
    if (Buffer.byteLength(this.#buf) >= this.#maxFrame) this.#oversize();
  }

  #oversize() {
    this.oversize = true;
    this.closeError = new BrokerError("oversize-frame", `the broker sent a frame over maxFrame (${this.#maxFrame} bytes): ` +
      "set it to the broker's");
    this.#buf = "";
    this.#socket.destroy();
  }

  /** Whether the socket is closed or closing: nothing written to it is sent. Its onClose is still to come. */
  get closing() {
    return this.#socket.destroyed;
  }

  /** The bytes written and not yet handed to the operating system. */
  get queued() {
    return this.#socket.writableLength;
  }

  /**
   * Writes one frame and answers null, or why nothing was written: "not-json" when JSON.stringify throws on it,
   * "too-large" when it does not fit in a frame, "queue-full" when maxQueued (if given) bytes would then wait to be
   * written.
   */
  write(frame, maxQueued) {
    let line;
    try {
      line = JSON.stringify(frame) + "\n";
    } catch {
      // NB: a throw here would leave the call waiting among those every connection sends, and throw out of #up on
      // each one: every later attempt to connect would fail, leaving the connection it had made open.
      return "not-json";
    }
    const n = Buffer.byteLength(line);
    if (n > this.#maxFrame) return "too-large";
    if (maxQueued !== undefined && this.#socket.writableLength + n > maxQueued) return "queue-full";
    this.#socket.write(line);
    return null;
  }

  destroy() {
    this.#socket.destroy();
    return this.#closed;
  }
}
