import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Child-process tests (concurrent ledger writers, lock holders, the CLI binary) run the built
 * code in dist/, so build it once before any test runs.
 */
export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  execFileSync(
    process.execPath,
    [`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
}
