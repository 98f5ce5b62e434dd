// A suite that needs an outside tool (strace, promtool, kubectl, PyYAML, Prometheus, ...): .ci/run installs
// each one, so in CI (CI=true) a missing tool fails the run where it is found missing; on a developer's
// machine the suite is skipped with a warning that says how to install it.
//   describe.skipIf(missingOutsideCi(!found, 'promtool (apt-get install -y prometheus)'))(...)
export function missingOutsideCi(missing: boolean, what: string): boolean {
  if (!missing) return false;
  if (process.env.CI === 'true') throw new Error(`${what} is missing: CI installs it and must run this suite`);
  console.warn(`SKIPPED: ${what} is missing`);
  return true;
}
