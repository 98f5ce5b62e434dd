#!/usr/bin/env node
// Entry point of the `ace` operator CLI (package.json "bin"). See run.ts for the routing and
// .helpers/cli-README-fragment.md for usage.
import { runCli } from './run.js';

// `ace ... | head` closes stdout early: that is not an error worth a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

runCli(process.argv.slice(2), process.env).then(
  (code) => {
    // exitCode rather than exit(): lets stdout drain when it is a pipe.
    process.exitCode = code;
  },
  (error: unknown) => {
    // A bug in the CLI itself: show it, but as a failure rather than a usage problem.
    process.stderr.write(`ace: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
