// Routing: finds the command words, parses the rest with node:util parseArgs, runs the command and
// maps every failure to its exit code. Kept apart from main.ts so it has no side effects on import.
import { parseArgs } from 'node:util';
import { GLOBAL_OPTIONS, type Command, type Context, type Values } from './command.js';
import { ALIASES, COMMANDS, GROUPS } from './commands/index.js';
import { EXIT, isCliError, UsageError } from './errors.js';
import { commandHelp, groupHelp, topHelp } from './help.js';
import { HttpClient } from './http.js';
import { consoleOutput, terminalSafe } from './output.js';
import { resolveSettings, type GlobalFlags } from './settings.js';

type Env = Record<string, string | undefined>;

/** Global options that take a value, so the value is not mistaken for a command word. */
const VALUED = new Set(
  Object.entries(GLOBAL_OPTIONS).flatMap(([name, spec]) =>
    spec.type === 'string' ? [`--${name}`, ...(spec.short ? [`-${spec.short}`] : [])] : [],
  ),
);

/** Indexes of the leading non-option words (at most `limit`), skipping global options and their values. */
function commandWords(argv: string[], limit: number): number[] {
  const found: number[] = [];
  for (let i = 0; i < argv.length && found.length < limit; i++) {
    const token = argv[i];
    if (token === '--') break;
    if (token.startsWith('-') && token !== '-') {
      if (VALUED.has(token)) i++;
      continue;
    }
    found.push(i);
  }
  return found;
}

interface Route {
  command?: Command;
  /** Words consumed, for help: [] top, [group], or the command's path. */
  path: string[];
  wordIndexes: number[];
}

function route(argv: string[]): Route {
  const indexes = commandWords(argv, 2);
  const words = indexes.map((i) => ALIASES[argv[i]] ?? argv[i]);
  if (words[0] === undefined) return { path: [], wordIndexes: [] };
  if (words[0] in GROUPS) {
    const group = words[0];
    if (words[1] === undefined) return { path: [group], wordIndexes: indexes.slice(0, 1) };
    const command = COMMANDS.find((c) => c.path[0] === group && c.path[1] === words[1]);
    if (!command) throw new UsageError(`unknown command "ace ${group} ${argv[indexes[1]]}"`, [group]);
    return { command, path: command.path, wordIndexes: indexes };
  }
  const command = COMMANDS.find((c) => c.path.length === 1 && c.path[0] === words[0]);
  if (!command) throw new UsageError(`unknown command "${argv[indexes[0]]}"`, []);
  return { command, path: command.path, wordIndexes: indexes.slice(0, 1) };
}

function helpText(path: string[]): string {
  if (path.length === 0) return topHelp();
  const command = COMMANDS.find((c) => c.path.join(' ') === path.join(' '));
  if (command) return commandHelp(command);
  if (path[0] in GROUPS) return groupHelp(path[0]);
  return topHelp();
}

function wantsHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((t) => t === '--help' || t === '-h');
}

/** Runs the CLI; resolves with the exit code. */
export async function runCli(argv: string[], env: Env): Promise<number> {
  const json = argv.includes('--json');
  const out = consoleOutput(json);
  let helpPath: string[] | undefined;
  try {
    // "ace help [command...]" is "ace [command...] --help".
    if (argv[0] === 'help') {
      const { path } = route(argv.slice(1));
      out.print(helpText(path));
      return EXIT.ok;
    }
    const found = route(argv);
    helpPath = found.path;
    if (wantsHelp(argv)) {
      out.print(helpText(found.path));
      return EXIT.ok;
    }
    if (!found.command) {
      throw new UsageError(found.path.length ? `"ace ${found.path[0]}" needs a command` : 'no command given', found.path);
    }
    const command = found.command;
    const rest = argv.filter((_, i) => !found.wordIndexes.includes(i));
    let values: Values;
    let positionals: string[];
    try {
      ({ values, positionals } = parseArgs({
        args: rest,
        options: { ...GLOBAL_OPTIONS, ...command.options },
        allowPositionals: true,
        strict: true,
      }) as { values: Values; positionals: string[] });
    } catch (error) {
      throw new UsageError((error as Error).message.split('\n')[0], command.path);
    }
    const { min, max } = command.args;
    if (positionals.length < min || positionals.length > max) {
      const expected = min === max ? `${min}` : max === Infinity ? `at least ${min}` : `${min} to ${max}`;
      throw new UsageError(`expected ${expected} argument(s), got ${positionals.length}: usage: ace ${command.usage}`, command.path);
    }

    const settings = resolveSettings(values as GlobalFlags, env);
    let admin: HttpClient | undefined;
    let publicClient: HttpClient | undefined;
    const ctx: Context = {
      out,
      admin: () => (admin ??= new HttpClient({ base: settings.adminUrl, label: 'admin API', timeoutMs: settings.timeoutMs, token: settings.adminToken })),
      public: () => (publicClient ??= new HttpClient({ base: settings.publicUrl, label: 'public API', timeoutMs: settings.timeoutMs })),
    };
    // Resolve the token before the first request so "no token" is a usage error, not a 401.
    if (command.path.join(' ') !== 'platform scopes-file') settings.adminToken();
    await command.run(ctx, values, positionals);
    return EXIT.ok;
  } catch (error) {
    if (!isCliError(error)) throw error;
    process.stderr.write(terminalSafe(`ace: error: ${error.message}\n`)); // the message may quote the service
    if (error instanceof UsageError) {
      const path = error.helpFor ?? helpPath ?? [];
      process.stderr.write(`Run "ace${path.length ? ` ${path.join(' ')}` : ''} --help" for usage.\n`);
    }
    return error.exitCode;
  }
}
