// Rendering: aligned plain-text tables for people, JSON for scripts. Results go to stdout; notes meant
// for the person at the terminal go to stderr so `--json` output stays parseable.

import { UNSAFE_NAME_CHARACTERS } from '../support/unsafe-text.js';

export type Cell = string | number | boolean | null | undefined;

// Strings from the service (names, details, descriptions) may hold control characters: an ESC starts a
// terminal escape sequence (colours, cursor moves, window titles, even clipboard writes), a line break
// forges table rows, a right-to-left override makes a name read as another, a zero-width space makes two
// names look alike. Names stored before the admin API refused them still exist, and descriptions are not
// refused, so every character the CLI prints passes here (support/unsafe-text.ts lists them). The escapes
// are JSON's, so a JSON line stays valid JSON.
const CONTROL = new RegExp(`[${UNSAFE_NAME_CHARACTERS}]`, 'g');
// The same without LF and TAB: a block's own layout.
const CONTROL_BUT_LAYOUT = new RegExp(`[${UNSAFE_NAME_CHARACTERS.replace('\\u0000-\\u001F', '\\u0000-\\u0008\\u000B-\\u001F')}]`, 'g');
const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const escapeOne = (c: string) => SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** A value inside a line (a table cell, a field): every control character escaped, line breaks included. */
export function escapeControl(value: string): string {
  return value.replace(CONTROL, escapeOne);
}

/** A block about to be written: its own line breaks and tabs kept, every other control character escaped. */
export function terminalSafe(block: string): string {
  return block.replace(CONTROL_BUT_LAYOUT, escapeOne);
}

function text(value: Cell): string {
  if (value === null || value === undefined || value === '') return '-';
  return escapeControl(String(value));
}

/** A table with an upper-case header row; columns padded to their widest cell. */
export function table(headers: string[], rows: Cell[][]): string {
  const cells = [headers, ...rows.map((row) => row.map(text))];
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? '').length)));
  return cells
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i])))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** "key  value" lines for one record. */
export function fields(pairs: [string, Cell][]): string {
  const width = Math.max(...pairs.map(([key]) => key.length));
  return pairs.map(([key, value]) => `${key.padEnd(width)}  ${text(value)}`).join('\n');
}

export interface Output {
  json: boolean;
  /** A result line (or block) on stdout. */
  print(block: string): void;
  /** A JSON result on stdout. */
  printJson(value: unknown): void;
  /** A note for the operator on stderr. Never pass secrets here. */
  note(message: string): void;
}

export function consoleOutput(json: boolean): Output {
  return {
    json,
    print: (block) => void process.stdout.write(terminalSafe(block.endsWith('\n') ? block : `${block}\n`)),
    // JSON.stringify escapes C0 but leaves DEL and C1 raw: terminalSafe gives them JSON escapes too.
    printJson: (value) => void process.stdout.write(terminalSafe(`${JSON.stringify(value, null, 2)}\n`)),
    note: (message) => void process.stderr.write(terminalSafe(`${message}\n`)),
  };
}
