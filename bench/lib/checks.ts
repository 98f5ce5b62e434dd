// Target checks: per-round values, their median and min–max, and the verdict (see stats.ts).
import { formatSpread, spread, verdict, type Spread, type Target, type Verdict } from './stats.js';

export interface Check {
  name: string;
  /** One value per round. */
  values: number[];
  spread: Spread | null;
  target: string;
  verdict: Verdict;
  note?: string;
}

export function check(name: string, values: number[], target: Target | null, note?: string): Check {
  return {
    name,
    values,
    spread: spread(values),
    target: target ? `${target.op} ${target.value}` : '-',
    verdict: target ? verdict(values, target) : 'n/a',
    note,
  };
}

export function checkRows(checks: Check[]): string[][] {
  return checks.map((c) => {
    const integers = c.values.every((v) => Number.isInteger(v));
    const digits = integers ? 0 : c.spread && Math.abs(c.spread.median) < 10 ? 2 : c.spread && Math.abs(c.spread.median) < 100 ? 1 : 0;
    return [c.name, formatSpread(c.spread, digits), c.target, c.target === '-' ? 'info' : c.verdict, c.note ?? ''];
  });
}

export const CHECK_HEADER = ['ratio / check (median of rounds, min–max)', 'value', 'target', 'verdict', 'note'];
