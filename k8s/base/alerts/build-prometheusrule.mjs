#!/usr/bin/env node
// Builds k8s/base/prometheusrule.yaml from the plain rule file alerts/ace-rules.yaml (the one source).
// Kustomize has no generator for a custom resource, so the rule groups are copied as text, indented under
// `spec:`: comments and formatting survive. `--check` changes nothing and exits 1 when the file is stale.
//   node k8s/base/alerts/build-prometheusrule.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const here = import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname);
export const RULES_FILE = path.join(here, 'ace-rules.yaml');
export const PROMETHEUS_RULE_FILE = path.resolve(here, '../prometheusrule.yaml');

const HEADER = `# GENERATED from alerts/ace-rules.yaml by \`node k8s/base/alerts/build-prometheusrule.mjs\`: edit that file,
# then run the script (test/e2e/alert-rules.test.ts fails when this file is stale).
# Alerts on the service's own metrics (GET /metrics on the admin port). Needs the Prometheus Operator CRDs.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: ace
  labels:
    app.kubernetes.io/name: ace
    app.kubernetes.io/component: server
spec:
`;

/** The PrometheusRule text for a plain rule file's text: its `groups:` block, indented under `spec:`. */
export function renderPrometheusRule(rulesText) {
  const lines = rulesText.replace(/\n+$/, '').split('\n');
  const start = lines.indexOf('groups:');
  if (start < 0) throw new Error('the rule file has no top-level "groups:" line');
  // Only the file's leading comment may precede `groups:`; anything else would be silently dropped.
  const before = lines.slice(0, start).filter((line) => line.trim() !== '' && !line.startsWith('#'));
  if (before.length > 0) throw new Error(`unexpected content before "groups:": ${before[0]}`);
  return HEADER + lines.slice(start).map((line) => (line === '' ? '' : `  ${line}`)).join('\n') + '\n';
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  const wanted = renderPrometheusRule(readFileSync(RULES_FILE, 'utf8'));
  const current = readFileSync(PROMETHEUS_RULE_FILE, 'utf8');
  if (process.argv.includes('--check')) {
    if (current !== wanted) {
      console.error(`${PROMETHEUS_RULE_FILE} is stale: run node k8s/base/alerts/build-prometheusrule.mjs`);
      process.exit(1);
    }
  } else if (current !== wanted) {
    writeFileSync(PROMETHEUS_RULE_FILE, wanted);
    console.log(`wrote ${PROMETHEUS_RULE_FILE}`);
  }
}
