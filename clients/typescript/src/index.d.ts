export { BrokerError, CrewClient, Subscription } from "./client.js";
export type {
  CallableMethod,
  CallOptions,
  ClientOptions,
  Credentials,
  ListenerSource,
  SubscribeOptions,
} from "./client.js";
export * from "./protocol.js";
