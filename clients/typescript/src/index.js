export { BrokerError, CrewClient, Subscription } from "./client.js";
export { CODES, LIMITS, METHODS, PROTOCOL_VERSION, PUSH_EVENTS, ROLES } from "./protocol.js";
