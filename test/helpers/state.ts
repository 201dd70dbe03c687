import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Digest } from '../../src/lib/index.js';
import { type ObjectStore, readTree } from '../../src/store/index.js';

/**
 * A directory's content as a map from relative path (`/`-separated) to what is there: `file
 * <mode> <content>` (short printable content as is, else its SHA-256), `dir`, or `link <target>`.
 * Two states are equal when their maps are.
 */
export type State = Map<string, string>;

export function fileSignature(mode: number, content: Buffer): string {
  const text = content.toString('utf8');
  const isShort = content.length <= 48 && /^[\x20-\x7e]*$/.test(text);
  const shown = isShort
    ? JSON.stringify(text)
    : `sha256:${createHash('sha256').update(content).digest('hex')}`;
  return `file ${(mode & 0o777).toString(8)} ${shown}`;
}

/** Reads a directory into a {@link State}, leaving out the names `skip` says (default `.rewind`). */
export async function readState(
  root: string,
  skip: (path: string) => boolean = (path) => path === '.rewind',
): Promise<State> {
  const state: State = new Map();
  const visit = async (relative: string): Promise<void> => {
    const names = (await readdir(join(root, relative))).sort();
    for (const name of names) {
      const path = relative === '' ? name : `${relative}/${name}`;
      if (skip(path)) continue;
      const absolute = join(root, path);
      const stats = await lstat(absolute);
      if (stats.isDirectory()) {
        state.set(path, 'dir');
        await visit(path);
      } else if (stats.isSymbolicLink()) state.set(path, `link ${await readlink(absolute)}`);
      else if (stats.isFile()) state.set(path, fileSignature(stats.mode, await readFile(absolute)));
      else state.set(path, 'other');
    }
  };
  await visit('');
  return state;
}

/** What a stored tree holds, as a {@link State}: every object read (and so digest-checked). */
export async function treeState(store: ObjectStore, tree: Digest, prefix = ''): Promise<State> {
  const state: State = new Map();
  for (const entry of (await readTree(store, tree)).entries) {
    const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.type === 'directory') {
      state.set(path, 'dir');
      for (const [inner, value] of await treeState(store, entry.digest, path)) {
        state.set(inner, value);
      }
    } else if (entry.type === 'symlink') state.set(path, `link ${entry.target}`);
    else state.set(path, fileSignature(entry.mode, await store.get(entry.digest)));
  }
  return state;
}

/** The state without the paths `leaveOut` names (and everything under them). */
export function without(state: State, leaveOut: (path: string) => boolean): State {
  return new Map([...state].filter(([path]) => !leaveOut(path)));
}

/** Whether two states hold the same paths with the same content. */
export function sameState(a: State, b: State): boolean {
  if (a.size !== b.size) return false;
  for (const [path, value] of a) if (b.get(path) !== value) return false;
  return true;
}

/** The differences between two states, one line each (at most `limit`), for a failure message. */
export function describeDifference(a: State, b: State, limit = 12): string {
  const lines: string[] = [];
  for (const path of new Set([...a.keys(), ...b.keys()])) {
    if (a.get(path) === b.get(path)) continue;
    lines.push(
      `  ${JSON.stringify(path)}: ${a.get(path) ?? '(absent)'} | ${b.get(path) ?? '(absent)'}`,
    );
  }
  const shown = lines.slice(0, limit);
  if (lines.length > limit) shown.push(`  ... and ${lines.length - limit} more`);
  return shown.join('\n');
}
