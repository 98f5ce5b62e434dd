// Rendering: aligned plain-text tables for people, JSON for scripts. Results go to stdout; notes meant
// for the person at the terminal go to stderr so `--json` output stays parseable.

export type Cell = string | number | boolean | null | undefined;

function text(value: Cell): string {
  if (value === null || value === undefined || value === '') return '-';
  return String(value);
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
    print: (block) => void process.stdout.write(block.endsWith('\n') ? block : `${block}\n`),
    printJson: (value) => void process.stdout.write(`${JSON.stringify(value, null, 2)}\n`),
    note: (message) => void process.stderr.write(`${message}\n`),
  };
}
