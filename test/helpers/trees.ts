import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createObjectStore, initStore } from '../../src/store/index.js';
import { snapshot } from '../../src/workspace/index.js';
import { makeTempDirectory } from './temp.js';

/**
 * The tree of a full read of `workspace` in a store of its own: every file read and hashed, no
 * cache or shortcut shared with what a test checks against it.
 */
export async function referenceTree(workspace: string): Promise<string> {
  const { directory } = await initStore(await makeTempDirectory());
  const result = await snapshot(workspace, {
    store: createObjectStore(directory),
    storeDirectory: directory,
    now: () => new Date(),
  });
  return result.tree;
}

/** A small deterministic PRNG (mulberry32), so a failure can be replayed. */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The files (and links) and directories under `root`, `.rewind` left out. */
export async function listAll(
  root: string,
  relative = '',
): Promise<{ files: string[]; dirs: string[] }> {
  const files: string[] = [];
  const dirs: string[] = [];
  for (const entry of await readdir(join(root, relative), { withFileTypes: true })) {
    if (entry.name === '.rewind') continue;
    const path = relative === '' ? entry.name : `${relative}/${entry.name}`;
    if (entry.isDirectory()) {
      dirs.push(path);
      const inner = await listAll(root, path);
      files.push(...inner.files);
      dirs.push(...inner.dirs);
    } else files.push(path);
  }
  return { files, dirs };
}
