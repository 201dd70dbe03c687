import { chmod, mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createObjectStore, initStore, type ObjectStore } from '../../src/store/index.js';
import { makeTempDirectory } from './temp.js';

/** A spec of files to lay out: path → text, or `{ link }` for a symbolic link, or `{ text, mode }`. */
export type Layout = Record<string, string | { link: string } | { text: string; mode: number }>;

/** Writes a layout under `root`. */
export async function lay(root: string, layout: Layout): Promise<void> {
  for (const [path, spec] of Object.entries(layout)) {
    const absolute = join(root, path);
    await mkdir(dirname(absolute), { recursive: true });
    if (typeof spec === 'string') await writeFile(absolute, spec);
    else if ('link' in spec) await symlink(spec.link, absolute);
    else {
      await writeFile(absolute, spec.text);
      await chmod(absolute, spec.mode);
    }
  }
}

/** A fresh workspace with a store and the given files. */
export async function makeWorkspace(
  layout: Layout = {},
): Promise<{ workspace: string; storeDirectory: string; store: ObjectStore }> {
  const workspace = await makeTempDirectory();
  const { directory } = await initStore(workspace);
  await lay(workspace, layout);
  return { workspace, storeDirectory: directory, store: createObjectStore(directory) };
}

/** A clock well ahead of the files' timestamps, so the stat cache trusts them at once. */
export const laterClock = (): Date => new Date(Date.now() + 60_000);
