// The alert rules, checked by Prometheus's own tool: `promtool check rules` on the plain rule file
// (k8s/base/alerts/ace-rules.yaml, the one source) and `promtool test rules` on its unit tests
// (ace-rules.test.yaml), which must cover every alert: it fires once its condition has held for its
// `for` (and not one evaluation earlier) and stays silent on healthy series. Also: the PrometheusRule
// the kustomization ships is built from that file and holds the same groups.
// promtool comes with Debian's `prometheus` package (.ci/run installs it). Missing outside CI, these
// tests are skipped with a warning; in CI (CI=true) a missing promtool fails.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ROOT, renderKustomization, type Json } from '../support/k8s.js';
// @ts-expect-error: a plain .mjs script (run with node, no build step), no type declarations
import { PROMETHEUS_RULE_FILE, RULES_FILE, renderPrometheusRule } from '../../k8s/base/alerts/build-prometheusrule.mjs';

const ALERTS_DIR = path.join(ROOT, 'k8s/base/alerts');
const UNIT_TESTS = path.join(ALERTS_DIR, 'ace-rules.test.yaml');

const promtoolFound = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;
if (!promtoolFound) {
  const message = 'promtool not found: the alert rules are NOT checked by Prometheus (apt-get install -y prometheus)';
  if (process.env.CI === 'true') throw new Error(`${message}; CI must have it`);
  console.warn(`\n!!! ${message} !!!\n`);
}

function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { cwd: ALERTS_DIR, encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** Go duration as promtool writes it in tests ("90s", "5m", "1h30m") -> seconds. */
function seconds(duration: string): number {
  const parts = [...duration.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  expect(parts.map((p) => p[0]).join(''), `duration ${duration}`).toBe(duration);
  const unit: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };
  return parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2]!]!, 0);
}

const rules: Json = parseYaml(readFileSync(RULES_FILE, 'utf8'));
const alertRules: Json[] = rules.groups.flatMap((g: Json) => g.rules).filter((r: Json) => r.alert);
const unitTests: Json = parseYaml(readFileSync(UNIT_TESTS, 'utf8'));

describe.skipIf(!promtoolFound)('alert rules under promtool', () => {
  it('promtool check rules: the rule file is valid', () => {
    const { status, output } = promtool('check', 'rules', RULES_FILE);
    expect(status, output).toBe(0);
    expect(output).toContain(`SUCCESS: ${alertRules.length} rules found`);
  });

  it('promtool test rules: every unit test passes', () => {
    const { status, output } = promtool('test', 'rules', UNIT_TESTS);
    expect(status, output).toBe(0);
    expect(output).toContain('SUCCESS');
  });
});

describe('the unit tests cover every alert', () => {
  const interval = seconds(unitTests.evaluation_interval ?? '1m');
  it.each(alertRules.map((r) => [r.alert, r] as const))('%s: fires after its `for`, not before, and never on the healthy series', (alert, rule) => {
    expect(unitTests.rule_files).toEqual(['ace-rules.yaml']);
    const groups = unitTests.tests.filter((t: Json) => (t.alert_rule_test ?? []).some((c: Json) => c.alertname === alert));
    expect(groups.length, `a test group for ${alert}`).toBeGreaterThan(0);
    const forSeconds = seconds(rule.for ?? '0s');
    let proven = false;
    for (const group of groups) {
      const cases = group.alert_rule_test.filter((c: Json) => c.alertname === alert);
      const healthy = group.input_series.filter((s: Json) => !/namespace="broken"/.test(s.series));
      expect(healthy.length, `${group.name}: healthy series beside the broken ones`).toBeGreaterThan(0);
      for (const firing of cases.filter((c: Json) => c.exp_alerts.length > 0)) {
        // promtool compares the whole set of firing alerts: only the broken namespace may be in it.
        for (const a of firing.exp_alerts) expect(a.exp_labels.namespace, `${alert} at ${firing.eval_time}`).toBe('broken');
        expect(seconds(firing.eval_time)).toBeGreaterThanOrEqual(forSeconds);
        const earlier = cases.find((c: Json) => seconds(c.eval_time) === seconds(firing.eval_time) - interval);
        if (forSeconds > 0 && earlier?.exp_alerts.length === 0) proven = true;
        if (forSeconds === 0) proven = true;
      }
    }
    expect(proven, `${alert}: a firing case and, one evaluation earlier, a silent one`).toBe(true);
  });
});

describe('the PrometheusRule is built from the plain rule file', () => {
  it('k8s/base/prometheusrule.yaml is what build-prometheusrule.mjs makes of ace-rules.yaml', () => {
    const wanted = renderPrometheusRule(readFileSync(RULES_FILE, 'utf8'));
    expect(readFileSync(PROMETHEUS_RULE_FILE, 'utf8'), 'stale: run node k8s/base/alerts/build-prometheusrule.mjs').toBe(wanted);
  });

  it.each(['k8s/base', 'k8s/overlays/production'])('%s renders a PrometheusRule whose groups are the rule file\'s', (dir) => {
    const rendered = renderKustomization(path.join(ROOT, dir)).filter((o) => o.kind === 'PrometheusRule');
    expect(rendered).toHaveLength(1);
    expect(rendered[0]!.spec).toEqual({ groups: rules.groups });
  });
});
