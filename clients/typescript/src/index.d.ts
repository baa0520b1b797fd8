export { BrokerError, CrewClient, Subscription } from "./client.js";
export type {
  CallableMethod,
  CallOptions,
  ClientEvents,
  ClientOptions,
  Credentials,
  ListenerSource,
  PushFrame,
  SubscribeOptions,
} from "./client.js";
export * from "./protocol.js";
