// Every command the CLI knows, and the groups they belong to (for routing and help).
import type { Command } from '../command.js';
import { agentCommands } from './agent.js';
import { grantCommands } from './grant.js';
import { keyCommands } from './keys.js';
import { platformCommands } from './platform.js';
import { eventCommands } from './events.js';
import { clientKeyCommands } from './client-keys.js';

export const COMMANDS: Command[] = [...platformCommands, ...agentCommands, ...grantCommands, ...keyCommands, ...eventCommands, ...clientKeyCommands];

export const GROUPS: Record<string, string> = {
  platform: 'Platforms, their scopes and routes, and their scope files',
  agent: 'Agents and their secrets',
  keys: 'Signing keys',
  issuer: 'Trusted workload identity issuers (agents without secrets)',
  binding: 'Workloads bound to agents',
};

/** Other spellings of group words. */
export const ALIASES: Record<string, string> = { platforms: 'platform', agents: 'agent', key: 'keys', issuers: 'issuer', bindings: 'binding' };
