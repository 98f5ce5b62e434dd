// The /metrics series the service exports (name, type, help text, label names), read from an exposition
// and compared with test/fixtures/metrics-series.json: the alert rules in k8s/, the Grafana dashboard and
// the operators' queries depend on them, so a refactor of where series are declared must not change one.
import { readFileSync } from 'node:fs';
import path from 'node:path';

export interface SeriesFamily {
  name: string;
  type: string;
  help: string;
  /** Label names of the family's samples (`le` of histogram buckets left out). */
  labels: string[];
}

export const EXPECTED_SERIES: SeriesFamily[] = JSON.parse(readFileSync(path.resolve(import.meta.dirname, '../fixtures/metrics-series.json'), 'utf8'));

/** Every family of a text exposition, sorted by name; `labels` from the samples present (empty without any). */
export function seriesFamilies(exposition: string): SeriesFamily[] {
  const help = new Map([...exposition.matchAll(/^# HELP (\S+) (.*)$/gm)].map((m) => [m[1]!, m[2]!]));
  const families = [...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => {
    const labels = new Set<string>();
    const samples = new RegExp(`^${name}(?:_bucket|_sum|_count)?\\{([^}]*)\\}`, 'gm');
    for (const [, pairs] of exposition.matchAll(samples)) for (const [, label] of pairs!.matchAll(/(\w+)="/g)) if (label !== 'le') labels.add(label!);
    return { name: name!, type: type!, help: help.get(name!) ?? '', labels: [...labels].sort() };
  });
  return families.sort((a, b) => (a.name < b.name ? -1 : 1));
}

/**
 * The differences between an exposition's families and the expected ones (empty when they agree).
 * A family without samples in the exposition has no label names to compare; every other family's must be
 * the expected ones.
 */
export function seriesDifferences(exposition: string, expected: SeriesFamily[] = EXPECTED_SERIES): string[] {
  const found = new Map(seriesFamilies(exposition).map((f) => [f.name, f]));
  const problems: string[] = [];
  for (const want of expected) {
    const got = found.get(want.name);
    if (!got) problems.push(`${want.name}: missing`);
    else {
      if (got.type !== want.type) problems.push(`${want.name}: type ${got.type}, expected ${want.type}`);
      if (got.help !== want.help) problems.push(`${want.name}: help "${got.help}", expected "${want.help}"`);
      if (got.labels.length > 0 && got.labels.join() !== want.labels.join()) problems.push(`${want.name}: labels ${got.labels.join()}, expected ${want.labels.join()}`);
    }
    found.delete(want.name);
  }
  for (const name of found.keys()) problems.push(`${name}: not expected`);
  return problems;
}
