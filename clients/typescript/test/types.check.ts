// Type-level tests of the declarations (tsc --noEmit, run by `npm run typecheck`): each @ts-expect-error is an
// error the types must catch; the rest must compile.
import {
  CrewClient,
  type DelegateResult,
  type ListenerSource,
  type MailboxPush,
  type MethodsFor,
  type SendResult,
  type TeamEvent,
} from "../src/index.js";

declare const worker: CrewClient<"worker">;
declare const orchestrator: CrewClient<"orchestrator">;
declare const admin: CrewClient<"admin">;

export async function typed(): Promise<void> {
  const d: DelegateResult = await worker.call("delegate.request", { prompt: "look", budgetTokens: 10 });
  d.grandchildTaskRef satisfies string;
  const s: SendResult = await orchestrator.call("msg.send", { to: "T", body: { any: "json" }, kind: "response", questionId: "q" });
  s.messageId satisfies string;
  const run = await admin.call("run.create", { team: "t", goal: "g", cwd: "/w" }, { commandId: "c1" });
  run.orchestratorToken satisfies string;
  await orchestrator.call("query.tasks");
  await admin.call("query.runs", { status: ["running", "queued"] });
  for await (const ev of worker.subscribe({ sinceSeq: 0 })) {
    ev satisfies TeamEvent;
    ev.metadata.seq satisfies number;
  }

  // @ts-expect-error a worker may not create runs
  await worker.call("run.create", { team: "t", goal: "g", cwd: "/w" });
  // @ts-expect-error the orchestrator may not delegate
  await orchestrator.call("delegate.request", { prompt: "p" });
  // @ts-expect-error prompt is required
  await worker.call("delegate.request", {});
  // @ts-expect-error priority is an enum
  await orchestrator.call("steer.push", { taskId: "T", body: "b", priority: "now" });
  // @ts-expect-error hello is the client's own
  await admin.call("hello", { protocol: 1, token: "x" });
  // @ts-expect-error events.subscribe is subscribe()'s
  await worker.call("events.subscribe", { sinceSeq: 0 });
  // @ts-expect-error not a method
  await admin.call("query.nothing");
}

// Every role has methods, and the admin's include the engine's.
export const adminMethods: MethodsFor<"admin">[] = ["run.create", "query.runs", "admin.checkpoint", "delegate.settle"];
export const workerMethods: MethodsFor<"worker">[] = ["delegate.request", "wait.request", "msg.send", "events.subscribe"];

CrewClient.connect({ socketPath: "/s", credentials: { role: "worker", runId: "R", taskId: "T", token: "x" } });
// @ts-expect-error a worker needs its task
CrewClient.connect({ socketPath: "/s", credentials: { role: "worker", runId: "R", token: "x" } });

CrewClient.connect({
  socketPath: "/s",
  credentials: { role: "admin", token: "x" },
  callTimeoutMs: Infinity,
  onListenerError: (error: unknown, source: ListenerSource) => console.error(source, error),
});
// @ts-expect-error a listener's source is one of the client's events or onEvent
export const source: ListenerSource = "error";

// The client's events, as client.js emits them: on, once and off take the same overloads.
export function listens(client: CrewClient<"orchestrator">): void {
  const onPush = (frame: { event: string; data: unknown; seq?: number }) => void frame.event;
  client.on("push", onPush);
  client.once("push", (frame) => frame.event satisfies string);
  client.off("push", onPush);
  client.once("mailbox", (message) => message satisfies MailboxPush);
  client.off("mailbox", (message) => message satisfies MailboxPush);
  client.off("disconnect", (error) => error.code satisfies string);
  // @ts-expect-error a push listener gets the frame, not a number
  client.once("push", (frame: number) => frame);
  // @ts-expect-error the client emits no such event
  client.once("pushed", () => {});
  // @ts-expect-error a push listener gets the frame, not a number
  client.off("push", (frame: number) => frame);
  // @ts-expect-error the client emits no such event
  client.off("pushed", () => {});
}
