import { EventEmitter } from "node:events";

import type {
  ErrorCode,
  HelloAck,
  MailboxPush,
  MethodsFor,
  ParamsOf,
  ResultOf,
  Role,
  TeamEvent,
} from "./protocol.js";

/** Who the client is: the role decides which methods `call` accepts (the broker checks the token). */
export type Credentials<R extends Role = Role> = R extends "admin"
  ? { role: "admin"; token: string }
  : R extends "orchestrator"
    ? { role: "orchestrator"; runId: string; token: string; /** default "orchestrator" */ taskId?: string }
    : { role: "worker"; runId: string; taskId: string; token: string };

/** What called a listener that threw or rejected: a subscription's onEvent, or the event the client emitted. */
export type ListenerSource = "onEvent" | keyof ClientEvents;

/**
 * The options of a client. A number option that is not a number of its kind (NaN, a negative, a fraction where a
 * count is asked, Infinity where a limit is) is refused by the constructor with a TypeError naming it.
 */
export interface ClientOptions<R extends Role = Role> {
  /** The broker's unix socket (crewd prints it: `crewd: socket PATH`). */
  socketPath: string;
  credentials: Credentials<R>;
  /** Dial again when the connection is lost while calls or a subscription wait (default true). */
  reconnect?: boolean;
  /**
   * Waits between connection attempts, in ms (default 20, 50, … 3200); its length is the number of retries. Each wait
   * is drawn between half its step and all of it (jitter), so that the clients of a crewd that restarted do not
   * dial again in lockstep.
   */
  backoffMs?: readonly number[];
  /** Each backoff wait's draw, a number in [0, 1) (default Math.random; anything else is the whole step). */
  random?: () => number;
  /** How long one connection attempt and its hello may take (default 5000 ms; 1 to 2³¹−1 ms). */
  connectTimeoutMs?: number;
  /**
   * How long a call waits for its answer, unless its own timeoutMs says otherwise (default 60000 ms; 1 to 2³¹−1 ms,
   * or Infinity: none): then it fails with code timeout. A `task.waitStatus`, which the broker answers when its wait
   * ends, waits this much after its wait (its timeoutMs as the broker reads it); `admin.checkpoint`, whose copy takes
   * as long as the store is large, has no default deadline.
   */
  callTimeoutMs?: number;
  /**
   * The broker's frame cap in bytes (default 262144); a request over it is refused locally, encode-failed. A frame
   * of the broker's over it closes the connection, and the calls it may have answered and the subscription fail
   * oversize-frame (they are not sent again: the answer would be as large).
   */
  maxFrame?: number;
  /**
   * The most bytes of requests that may wait in the socket to be written (default 16 × maxFrame), and apart from them
   * the most that may wait for a connection (while the client connects, or connects again): a call that would pass
   * it, because the broker is not reading or not there, is refused locally with code busy (retry later), and nothing
   * of it is sent. Calls a lost connection leaves unanswered wait for the next one whatever their bytes.
   */
  maxQueuedBytes?: number;
  /**
   * Called with what a listener threw, or what the promise it returned rejected with: a subscription's onEvent or a
   * listener of the client's events. The client reads on (the frames after it, the other listeners of the event).
   * Default: a process warning (`CrewClientListenerError`), which Node prints; not an `error` event, which would
   * throw where no one listens and reject every pending `events.once(client, …)`.
   */
  onListenerError?: (error: unknown, source: ListenerSource) => void;
}

export interface CallOptions {
  /** The idempotency key of an engine command (default: params.commandId, else a new UUID). */
  commandId?: string;
  /**
   * Reject with code timeout when no answer came within this many ms (default: the client's callTimeoutMs; Infinity:
   * none). The command may still be decided: retry with err.commandId. Not a number of ms from 1 to 2³¹−1 (the
   * longest wait setTimeout takes) nor Infinity: a TypeError, nothing sent.
   */
  timeoutMs?: number;
}

export interface SubscribeOptions {
  /** The last seq already seen; events after it are delivered (default 0: the whole run). */
  sinceSeq?: number;
  /** Only these event types. */
  types?: string[];
  /** The run, for the admin. */
  runId?: string;
  /**
   * Called for every event, in seq order; the subscription is then not iterated. What it throws or rejects with goes
   * to the client's onListenerError, and the events after it are delivered.
   */
  onEvent?: (event: TeamEvent) => unknown;
  /**
   * The most events buffered for an iterator that does not read them (default 10000). Once the buffer is full the
   * subscription takes no more pushes — the broker's subscription goes on, and what it pushes meanwhile is not kept
   * — and when the buffer has been read it subscribes again after the last event it took, so nothing is lost or
   * repeated. Not a positive integer: subscribe() throws a TypeError and the subscription it would replace stays.
   */
  highWaterMark?: number;
  /**
   * The most bytes of events (as their frames are long) buffered likewise (default 64 × the client's maxFrame: 16 MiB
   * at the default frame); one event is buffered however large. Not a positive integer: a TypeError, as highWaterMark.
   */
  highWaterMarkBytes?: number;
}

type CallArgs<M extends keyof import("./protocol.js").Methods> = {} extends ParamsOf<M>
  ? [params?: ParamsOf<M>, options?: CallOptions]
  : [params: ParamsOf<M>, options?: CallOptions];

/** The methods `call` sends: the role's, but events.subscribe, which is `subscribe()`'s (one per connection). */
export type CallableMethod<R extends Role> = Exclude<MethodsFor<R>, "events.subscribe">;

/** An error answered by the broker, or found by the client (a LocalCode, or timeout). */
export declare class BrokerError extends Error {
  constructor(code: ErrorCode, message?: string, details?: { method?: string; commandId?: string });
  readonly code: ErrorCode;
  /** The method whose call failed. */
  readonly method?: string;
  /** The commandId the failed command was sent with: retry with it to learn its outcome. */
  readonly commandId?: string;
  /** Whether the broker closes the connection after this code. */
  readonly closes: boolean;
}

/** The events of one subscription, in seq order, never repeated or skipped. */
export declare class Subscription implements AsyncIterableIterator<TeamEvent> {
  /**
   * The seq of the last event handed to you — returned by next() or passed to onEvent — or the sinceSeq it started
   * from; not of those still buffered. Subscribe again with it as sinceSeq (after close(), say, or in a process that
   * starts again) to miss nothing.
   */
  readonly lastSeq: number;
  readonly types?: string[];
  readonly closed: boolean;
  /** How often it resumed after a resync frame, a gap or its buffer filling. */
  readonly resyncs: number;
  /**
   * The next event; done once the subscription is closed (by its close() or the client's), else rejected, once, with
   * what ended it (the connection lost for good, code closed; a refusal of the broker's), whether it waited or not.
   */
  next(): Promise<IteratorResult<TeamEvent, undefined>>;
  return(): Promise<IteratorResult<TeamEvent, undefined>>;
  [Symbol.asyncIterator](): this;
  close(): void;
}

/** A push frame of an event the client does not read itself (not team.event, resync or mailbox.message). */
export interface PushFrame {
  event: string;
  data: unknown;
  seq?: number;
}

/** The events a client emits, and what their listeners get. */
export interface ClientEvents {
  /** A mailbox.message push's data (best effort: none while disconnected). */
  mailbox: (message: MailboxPush) => void;
  /** The answer to the hello of a connection made again after one was lost. */
  reconnect: (hello: HelloAck) => void;
  /** Why the connection was lost. */
  disconnect: (error: BrokerError) => void;
  /** close() ended the client. */
  close: () => void;
  /** A push frame of another event, whole. */
  push: (frame: PushFrame) => void;
}

export declare class CrewClient<R extends Role = Role> extends EventEmitter {
  /**
   * Connects and says hello; rejects with the broker's error (auth, stale-token, revoked, …), with protocol when the
   * first frame is neither the hello's answer nor an error of id "", or with exhausted.
   */
  static connect<R extends Role>(options: ClientOptions<R>): Promise<CrewClient<R>>;
  constructor(options: ClientOptions<R>);
  readonly role: R;
  readonly connected: boolean;
  /** The answer to the latest hello. */
  readonly hello: HelloAck | null;
  /** A fresh commandId (a random UUID). */
  newCommandId(): string;
  /**
   * Calls a method of the role. An engine command is sent with a commandId that every resend after a lost
   * connection reuses, so a lost answer is learned and the command is never decided twice. `admin.checkpoint`, which
   * cannot be repeated, is not sent again: its call fails `request-failed` when the connection is lost before its
   * answer. A `task.waitStatus` is sent again with the time left of its timeoutMs, and fails wait-timeout once that
   * has passed; a status the task reached and left while the connection was down is not seen.
   * events.subscribe is refused (bad-method): `subscribe()` owns the connection's one subscription. Params are an
   * object, or absent (undefined, null: none); anything else (a string, a number, a boolean, an array) is refused with
   * a TypeError, nothing sent.
   */
  call<M extends CallableMethod<R>>(method: M, ...args: CallArgs<M>): Promise<ResultOf<M>>;
  /**
   * Subscribes to the run's events (one subscription per client; a new one replaces it). A listener of the client's
   * events that throws or rejects is reported to onListenerError, never thrown out of the client.
   */
  subscribe(options?: SubscribeOptions): Subscription;
  /** Closes the connection; calls not yet answered are rejected with code closed. */
  close(): Promise<void>;

  // NB: on, once and off take the same overloads, one per event client.js emits (ClientEvents).
  on<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  once<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
  off<E extends keyof ClientEvents>(event: E, listener: ClientEvents[E]): this;
}
