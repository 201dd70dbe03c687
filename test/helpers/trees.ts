import {
  appendFile,
  chmod,
  link,
  lstat,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { createObjectStore, initStore } from '../../src/store/index.js';
import { snapshot } from '../../src/workspace/index.js';
import { makeTempDirectory } from './temp.js';
import { lay } from './workspace.js';

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

/**
 * One random edit of the kinds users make, for the tests that hold a fast path of the snapshot
 * equal to a full read: files written, appended to, deleted, renamed and re-moded; directories
 * made (one, or a chain with a file at its end), deleted, renamed and swapped; a tree moved in from outside with old timestamps in place
 * of a directory; a directory moved out, changed there, and moved back; a hard link made beside a
 * file; a write through a link of `outsideLinks` (files outside the workspace linked to files in
 * it); a file rewritten with its size and times kept. An edit that makes no sense where it lands
 * (a name taken by a directory) just fails, as it would for a user.
 */
export async function randomEdit(
  workspace: string,
  next: () => number,
  tag: string,
  outsideLinks: readonly string[] = [],
): Promise<void> {
  const { files, dirs } = await listAll(workspace);
  const pick = <T>(list: readonly T[]): T | undefined => list[Math.floor(next() * list.length)];
  const choice = next();
  const directory = pick(dirs) ?? '';
  const file = pick(files);
  const target = join(workspace, directory, `n${Math.floor(next() * 1000)}`);
  const outside = async () => join(await makeTempDirectory(), 'tree');
  await (async () => {
    if (choice < 0.25) await writeFile(target, tag);
    else if (choice < 0.33) {
      // A directory, or a chain of them with a file at the end, made as fast as mkdir -p makes it.
      const chain = next() < 0.5 ? target : join(target, 'p', 'q');
      await mkdir(chain, { recursive: true });
      if (chain !== target) await writeFile(join(chain, 'f'), tag);
    } else if (choice < 0.46 && file) await appendFile(join(workspace, file), 'x');
    else if (choice < 0.54 && file) await rm(join(workspace, file), { force: true });
    else if (choice < 0.61 && dirs.length > 0)
      await rm(join(workspace, pick(dirs) as string), { recursive: true, force: true });
    else if (choice < 0.68 && file) await rename(join(workspace, file), target);
    else if (choice < 0.72 && dirs.length > 0) {
      const from = pick(dirs) as string;
      if (!`${directory}/`.startsWith(`${from}/`)) await rename(join(workspace, from), target);
    } else if (choice < 0.76 && dirs.length > 1) {
      // Swap two directories that are not inside one another.
      const one = pick(dirs) as string;
      const other = pick(dirs) as string;
      if (`${one}/`.startsWith(`${other}/`) || `${other}/`.startsWith(`${one}/`)) return;
      await rename(join(workspace, one), join(workspace, 'swap-tmp'));
      await rename(join(workspace, other), join(workspace, one));
      await rename(join(workspace, 'swap-tmp'), join(workspace, other));
    } else if (choice < 0.79 && dirs.length > 0) {
      // A tree moved in from outside, with old timestamps, in place of a directory.
      const replaced = pick(dirs) as string;
      const tree = await outside();
      await lay(tree, { f0: `outside ${tag}`, 'e0/f1': `outside ${tag}` });
      const past = new Date(Date.now() - 86_400_000);
      for (const path of ['f0', 'e0/f1', 'e0', '']) await utimes(join(tree, path), past, past);
      await rm(join(workspace, replaced), { recursive: true, force: true });
      await rename(tree, join(workspace, replaced));
    } else if (choice < 0.82 && dirs.length > 0) {
      // Moved out, changed there (a file added, one rewritten with its times kept), moved back.
      const moved = pick(dirs) as string;
      const parked = await outside();
      await rename(join(workspace, moved), parked);
      await writeFile(join(parked, `parked-${tag}`), tag);
      const inner = (await listAll(parked)).files.find((path) => !path.includes('parked-'));
      if (inner !== undefined) await rewriteKeepingTimes(join(parked, inner));
      await rename(parked, join(workspace, moved));
    } else if (choice < 0.86 && file) await link(join(workspace, file), target);
    else if (choice < 0.9 && outsideLinks.length > 0)
      await appendFile(pick(outsideLinks) as string, 'through a link');
    else if (choice < 0.94 && file) await rewriteKeepingTimes(join(workspace, file));
    else if (choice < 0.97 && file)
      await chmod(join(workspace, file), next() < 0.5 ? 0o755 : 0o644);
    else if (dirs.length > 0) await chmod(join(workspace, directory), next() < 0.5 ? 0o755 : 0o750);
  })().catch(() => {});
}

/** Changes a file's first byte and sets its times back: same size, same mtime (not ctime). */
async function rewriteKeepingTimes(path: string): Promise<void> {
  const stats = await lstat(path);
  if (!stats.isFile() || stats.size === 0) return;
  const content = await readFile(path);
  content[0] = (content[0] as number) ^ 1;
  await writeFile(path, content);
  await utimes(path, stats.atime, stats.mtime);
}
