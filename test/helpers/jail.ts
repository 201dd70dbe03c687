// A workspace for fuzzing what can write files, from processes run as the unprivileged user
// (test/helpers/as-nobody.mjs) when the tests run as root: it lies eight levels below
// directories that user cannot write, beside a sentinel directory, so a path check that fails
// reaches nothing but the two, and the test sees it in the sentinel.
import { execFileSync } from 'node:child_process';
import {
  chmod,
  chown,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT } from './processes.js';

/** Runs a script as the unprivileged user when root: `node AS_NOBODY SCRIPT ARGS...`. */
export const AS_NOBODY = join(ROOT, 'test', 'helpers', 'as-nobody.mjs');

const NOBODY = 65534;

/** What {@link makeJail} made. */
export interface Jail {
  /** The workspace: a.txt, src/main.ts, dir/, messages.json, bad.json, link-out -> ../outside. */
  workspace: string;
  /** The sentinel beside it: secret.txt and nothing else. */
  outside: string;
  /** Fails unless the sentinel is as it was. */
  expectOutsideUntouched(): Promise<void>;
  /** Removes everything. */
  remove(): Promise<void>;
}

/** Makes a jail (kept until {@link Jail.remove}: fuzz properties span several tests). */
export async function makeJail(prefix: string): Promise<Jail> {
  const root = await mkdtemp(join(tmpdir(), prefix));
  await chmod(root, 0o755);
  const deep = join(root, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h');
  await mkdir(deep, { recursive: true, mode: 0o755 });
  const workspace = join(deep, 'ws');
  const outside = join(deep, 'outside');
  await mkdir(join(workspace, 'src'), { recursive: true });
  await mkdir(join(workspace, 'dir'));
  await mkdir(outside);
  await writeFile(join(workspace, 'a.txt'), 'a\n');
  await writeFile(join(workspace, 'src', 'main.ts'), 'export const main = 1;\n');
  await writeFile(join(workspace, 'messages.json'), '[{"role":"user","content":"hi"}]');
  await writeFile(join(workspace, 'bad.json'), '[{"role":{"toString":1}}, 1e400, ');
  await symlink('../outside', join(workspace, 'link-out'));
  await writeFile(join(outside, 'secret.txt'), 'secret\n');
  if (process.getuid?.() === 0) {
    for (const path of [workspace, join(workspace, 'src'), join(workspace, 'dir'), outside]) {
      await chown(path, NOBODY, NOBODY);
    }
    for (const file of ['a.txt', 'src/main.ts', 'messages.json', 'bad.json']) {
      await chown(join(workspace, file), NOBODY, NOBODY);
    }
    await chown(join(outside, 'secret.txt'), NOBODY, NOBODY);
  }
  return {
    workspace,
    outside,
    async expectOutsideUntouched() {
      expect(await readdir(outside)).toEqual(['secret.txt']);
      expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('secret\n');
    },
    async remove() {
      // A fuzzed path may nest deeper than Node can remove; rm -rf can.
      await rm(root, { recursive: true, force: true }).catch(() =>
        execFileSync('rm', ['-rf', root]),
      );
    },
  };
}
