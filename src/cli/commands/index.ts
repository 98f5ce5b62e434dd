// Every command the CLI knows, and the groups they belong to (for routing and help).
import type { Command } from '../command.js';
import { agentCommands } from './agent.js';
import { grantCommands } from './grant.js';
import { keyCommands } from './keys.js';
import { platformCommands } from './platform.js';
import { eventCommands } from './events.js';

export const COMMANDS: Command[] = [...platformCommands, ...agentCommands, ...grantCommands, ...keyCommands, ...eventCommands];

export const GROUPS: Record<string, string> = {
  platform: 'Platforms, their scopes and routes, and their scope files',
  agent: 'Agents and their secrets',
  keys: 'Signing keys',
};

/** Other spellings of group words. */
export const ALIASES: Record<string, string> = { platforms: 'platform', agents: 'agent', key: 'keys' };
