// The previous release's build for the mixed-version test: scripts/previous-release.mjs (a plain script, so
// that .ci/run builds it before the suites without a build step of its own), typed here.
// @ts-expect-error: a plain .mjs script (run with node, no build step), no type declarations
import { buildPreviousRelease as build } from '../../scripts/previous-release.mjs';

export interface PreviousRelease {
  commit: string;
  dir: string;
  /** Its dist/src/main.js. */
  main: string;
  /** How long the build took now (0 when it came from .ci/cache). */
  builtInMs: number;
}

export const buildPreviousRelease: () => PreviousRelease = build;
