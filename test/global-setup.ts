import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Child-process tests (concurrent ledger writers, lock holders, the CLI binary, the packed
 * tarball) run the built code in dist/, so build it once before any test runs. The build starts
 * from an empty dist/, as `npm run build` does, so nothing left from a deleted or renamed source
 * is run or packed; the `rewind` command's bundles (scripts/bundle.mjs) are made from it.
 */
export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  rmSync(`${root}dist`, { recursive: true, force: true });
  execFileSync(
    process.execPath,
    [`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
  execFileSync(process.execPath, [`${root}scripts/bundle.mjs`], { cwd: root, stdio: 'inherit' });
}
