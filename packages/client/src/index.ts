// Agent client of the Agent Credential Exchange. Import as `agent-credential-exchange/client`.
export { AgentClient, DEFAULT_MAX_WAIT_MS } from './agent-client.js';
export type { AgentClientOptions, PlatformEntry } from './agent-client.js';
export { AgentClientError, RetriesExhaustedError, ERR_UNREACHABLE, ERR_BAD_RESPONSE } from './errors.js';
export type { PlatformListing } from './service-api.js';
export type { AssertionAlgorithm } from './client-assertion.js';
