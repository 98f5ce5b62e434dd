// Agent client of the Agent Credential Exchange. Import as `agent-credential-exchange/client`.
export { AgentClient } from './agent-client.js';
export type { AgentClientOptions, PlatformEntry } from './agent-client.js';
export { AgentClientError } from './errors.js';
export type { PlatformListing } from './service-api.js';
