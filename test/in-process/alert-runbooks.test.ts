// Every alert carries a runbook_url pointing at its own section of docs/operations.md (a heading that
// exists there), in the plain rule file and in the PrometheusRule generated from it.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOC = 'docs/operations.md';
const RUNBOOK_BASE = `https://github.com/example/agent-credential-exchange/blob/main/${DOC}#`;

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchors(text: string): Set<string> {
  const prose = text.replace(/^```[\s\S]*?^```/gm, '');
  return new Set(
    [...prose.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)].map((m) =>
      m[1]!.replace(/`/g, '').toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'),
    ),
  );
}

type Rule = { alert?: string; annotations?: Record<string, string> };
const rulesOf = (groups: { rules: Rule[] }[]) => groups.flatMap((g) => g.rules).filter((r) => r.alert);

describe('alert runbooks', () => {
  const headings = anchors(readFileSync(path.join(ROOT, DOC), 'utf8'));
  const sources = {
    'k8s/base/alerts/ace-rules.yaml': rulesOf(parse(readFileSync(path.join(ROOT, 'k8s/base/alerts/ace-rules.yaml'), 'utf8')).groups),
    'k8s/base/prometheusrule.yaml': rulesOf(parse(readFileSync(path.join(ROOT, 'k8s/base/prometheusrule.yaml'), 'utf8')).spec.groups),
  };

  it.each(Object.entries(sources))('every alert in %s has a runbook_url whose anchor is its own heading in docs/operations.md', (_file, rules) => {
    expect(rules.length).toBeGreaterThan(10);
    const problems: string[] = [];
    for (const rule of rules) {
      const url = rule.annotations?.runbook_url;
      if (!url) {
        problems.push(`${rule.alert}: no runbook_url`);
        continue;
      }
      if (!url.startsWith(RUNBOOK_BASE)) problems.push(`${rule.alert}: ${url} is not a section of ${DOC}`);
      const anchor = url.slice(url.indexOf('#') + 1);
      if (anchor !== rule.alert!.toLowerCase()) problems.push(`${rule.alert}: anchor #${anchor} is not the alert's own section`);
      if (!headings.has(anchor)) problems.push(`${rule.alert}: no heading #${anchor} in ${DOC}`);
    }
    expect(problems).toEqual([]);
  });
});
