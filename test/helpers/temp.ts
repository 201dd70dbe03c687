import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';

const created: string[] = [];

afterEach(async () => {
  await Promise.all(
    created.splice(0).map((directory) =>
      // Node cannot remove a tree deeper than the system's longest path; rm -rf (which works
      // relative to open directories) can.
      rm(directory, { recursive: true, force: true }).catch(() =>
        execFileSync('rm', ['-rf', directory]),
      ),
    ),
  );
});

/** A fresh, empty temporary directory, removed after the test. */
export async function makeTempDirectory(prefix = 'rewind-test-'): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), prefix));
  created.push(directory);
  return directory;
}
