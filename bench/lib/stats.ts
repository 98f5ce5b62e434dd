// Statistics of repeated rounds: median with min–max, and a verdict that refuses to call a result a pass
// when the rounds disagree about it. Pure functions (unit-tested in test/in-process/bench-stats.test.ts).

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** Number of rounds. */
  n: number;
}

/** Median (mean of the two middle values for an even count), min and max; NaN-free input expected. */
export function spread(values: readonly number[]): Spread | null {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return null;
  const sorted = [...finite].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[sorted.length - 1], n: sorted.length };
}

export type Comparison = '>=' | '<=' | '=';
export type Verdict = 'PASS' | 'MISS' | 'within noise' | 'n/a';

export interface Target {
  op: Comparison;
  value: number;
}

const meets = (v: number, t: Target): boolean => (t.op === '>=' ? v >= t.value : t.op === '<=' ? v <= t.value : v === t.value);

/**
 * PASS or MISS only when the rounds agree: if some rounds meet the target and others do not (min–max
 * straddles it), or the spread of the rounds (max − min) is wider than the margin between the median and
 * the target, the result is "within noise". Exact checks (`=`, e.g. "errors = 0") pass only when every
 * round meets them. A single round cannot show its noise: its verdict stands as measured.
 */
export function verdict(values: readonly number[], target: Target): Verdict {
  const s = spread(values);
  if (!s) return 'n/a';
  if (target.op === '=') return values.every((v) => meets(v, target)) ? 'PASS' : 'MISS';
  const medianMeets = meets(s.median, target);
  if (s.n === 1) return medianMeets ? 'PASS' : 'MISS';
  const straddles = meets(s.min, target) !== meets(s.max, target);
  const margin = Math.abs(s.median - target.value);
  if (straddles || s.max - s.min > margin) return 'within noise';
  return medianMeets ? 'PASS' : 'MISS';
}

/** Per-round ratios a[i] / b[i] of paired rounds (skipping rounds where either side is missing or b is 0). */
export function pairedRatios(a: readonly (number | undefined)[], b: readonly (number | undefined)[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined || !Number.isFinite(x) || !Number.isFinite(y) || y === 0) continue;
    out.push(x / y);
  }
  return out;
}

/** "1,234 (1,200–1,260)" style: the median with the min–max of the rounds beside it. */
export function formatSpread(s: Spread | null, digits = 0): string {
  if (!s) return '-';
  const f = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  return s.n === 1 ? f(s.median) : `${f(s.median)} (${f(s.min)}–${f(s.max)})`;
}
