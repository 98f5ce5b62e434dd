// Help text, generated from the command table so it cannot drift from what is accepted.
import { GLOBAL_OPTIONS, type Command, type OptionSpec } from './command.js';
import { COMMANDS, GROUPS } from './commands/index.js';

const EXIT_CODES = 'Exit codes: 0 ok, 1 the service refused or failed (its detail and error_code are printed), 2 usage error, 3 cannot connect.';

function optionLines(options: Record<string, OptionSpec>): string {
  const rows = Object.entries(options).map(([name, spec]) => {
    const flag = `${spec.short ? `-${spec.short}, ` : '    '}--${name}${spec.type === 'string' ? ` ${spec.value ?? 'VALUE'}` : ''}`;
    return [flag, spec.description + (spec.multiple ? ' (repeatable)' : '')] as const;
  });
  const width = Math.max(...rows.map(([flag]) => flag.length));
  return rows.map(([flag, text]) => `  ${flag.padEnd(width)}  ${text}`).join('\n');
}

function commandLines(commands: Command[]): string {
  const width = Math.max(...commands.map((c) => c.path.join(' ').length));
  return commands.map((c) => `  ${c.path.join(' ').padEnd(width)}  ${c.summary}`).join('\n');
}

export function topHelp(): string {
  return `ace - operator CLI of the Agent Credential Exchange Service

Usage: ace <command> [arguments] [options]

Commands:
${commandLines(COMMANDS)}

Global options:
${optionLines(GLOBAL_OPTIONS)}

${EXIT_CODES}
Run "ace <command> --help" for the options of a command.
`;
}

export function groupHelp(group: string): string {
  const commands = COMMANDS.filter((c) => c.path[0] === group);
  return `ace ${group} - ${GROUPS[group]}

Usage: ace ${group} <${commands.map((c) => c.path[1]).join('|')}> [arguments] [options]

Commands:
${commandLines(commands)}

Run "ace ${group} <command> --help" for details; "ace --help" for the global options.
`;
}

export function commandHelp(command: Command): string {
  const parts = [`Usage: ace ${command.usage} [global options]`, '', command.summary + '.'];
  if (command.description) parts.push('', command.description);
  if (command.options && Object.keys(command.options).length) parts.push('', 'Options:', optionLines(command.options));
  parts.push('', 'Global options:', optionLines(GLOBAL_OPTIONS), '', EXIT_CODES);
  return parts.join('\n') + '\n';
}
