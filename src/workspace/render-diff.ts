import { nameBytes } from '../lib/index.js';
import type { ObjectStore, TreeEntry } from '../store/index.js';
import { lineRuns, linesOf, unifiedHunks } from './line-diff.js';
import type { TreeChange } from './tree-diff.js';

/** Text files larger than this are summarized instead of diffed line by line. */
const MAX_TEXT_DIFF_BYTES = 1024 * 1024;

async function textOf(
  store: ObjectStore,
  entry: TreeEntry | undefined,
): Promise<string | undefined> {
  if (!entry) return '';
  if (entry.type !== 'file' || entry.sizeBytes > MAX_TEXT_DIFF_BYTES) return undefined;
  const bytes = await store.get(entry.digest);
  if (bytes.subarray(0, 8192).includes(0)) return undefined;
  const text = bytes.toString('utf8');
  return Buffer.byteLength(text) === bytes.length && !text.includes('\uFFFD') ? text : undefined;
}

function describe(entry: TreeEntry | undefined): string {
  if (!entry) return 'nothing';
  if (entry.type === 'symlink') return `a symbolic link to ${entry.target}`;
  if (entry.type === 'directory') return `a directory (mode ${entry.mode.toString(8)})`;
  return `a file of ${entry.sizeBytes} bytes (mode ${entry.mode.toString(8)})`;
}

/** How git's C-style quoting writes each byte that needs it (others as three octal digits). */
const QUOTED: Record<number, string> = {
  7: '\\a',
  8: '\\b',
  9: '\\t',
  10: '\\n',
  11: '\\v',
  12: '\\f',
  13: '\\r',
  34: '\\"',
  92: '\\\\',
};

/**
 * A path as `git diff` writes it in a header: as it is when every byte is printable ASCII, else
 * in double quotes with C escapes, each byte outside ASCII as three octal digits (its UTF-8 bytes,
 * or the bytes of a name that is not UTF-8, exactly).
 */
function quotedName(path: string): string {
  const isPlain = (byte: number) => byte >= 0x20 && byte < 0x7f && byte !== 34 && byte !== 92;
  const bytes = nameBytes(path);
  if (bytes.every(isPlain)) return path;
  let quoted = '';
  for (const byte of bytes) {
    quoted += isPlain(byte)
      ? String.fromCharCode(byte)
      : (QUOTED[byte] ?? `\\${byte.toString(8).padStart(3, '0')}`);
  }
  return `"${quoted}"`;
}

/**
 * A change's sides as files see them: a directory is nothing there (what is under it comes as
 * changes of its own), so a file that became a directory shows as deleted, and the reverse as
 * added.
 */
function fileSides(change: TreeChange): [TreeEntry | undefined, TreeEntry | undefined] {
  const side = (entry: TreeEntry | undefined) => (entry?.type === 'directory' ? undefined : entry);
  return [side(change.before), side(change.after)];
}

/**
 * Renders changes as a unified diff, like `git diff`: text files line by line, binary and large
 * files summarized, mode changes and symbolic links described. Directories are implied by the
 * files in them.
 */
export async function renderDiff(
  store: ObjectStore,
  changes: readonly TreeChange[],
): Promise<string> {
  const parts: string[] = [];
  for (const change of changes) {
    const { path } = change;
    if (change.before?.type === 'directory' && change.after?.type === 'directory') {
      const modes = `${change.before.mode.toString(8)} -> ${change.after.mode.toString(8)}`;
      parts.push(`mode of directory ${path}: ${modes}\n`);
      continue;
    }
    const [before, after] = fileSides(change);
    if (!before && !after) continue;
    const oldName = before ? quotedName(`a/${path}`) : '/dev/null';
    const newName = after ? quotedName(`b/${path}`) : '/dev/null';
    if (before?.type !== 'file' || after?.type !== 'file') {
      if (before?.type === 'symlink' || after?.type === 'symlink') {
        parts.push(`${path}: ${describe(before)} -> ${describe(after)}\n`);
        continue;
      }
    }
    if (before?.type === 'file' && after?.type === 'file' && before.digest === after.digest) {
      parts.push(`mode of ${path}: ${before.mode.toString(8)} -> ${after.mode.toString(8)}\n`);
      continue;
    }
    const [oldText, newText] = await Promise.all([textOf(store, before), textOf(store, after)]);
    if (oldText === undefined || newText === undefined) {
      parts.push(
        `Binary files ${oldName} and ${newName} differ (${describe(before)} -> ${describe(after)})\n`,
      );
      continue;
    }
    const runs = lineRuns(linesOf(oldText), linesOf(newText));
    parts.push(`--- ${oldName}\n+++ ${newName}\n${unifiedHunks(runs, 3)}`);
  }
  return parts.join('');
}

/** Lines added and removed across changes, as `git diff --stat` counts them. */
export interface LineCounts {
  linesAdded: number;
  linesRemoved: number;
}

/**
 * Counts the lines that changes add and remove in text files, by the same line diff as
 * `renderDiff`; binary files and files over 1 MiB are not counted.
 */
export async function countLineChanges(
  store: ObjectStore,
  changes: readonly TreeChange[],
): Promise<LineCounts> {
  const counts: LineCounts = { linesAdded: 0, linesRemoved: 0 };
  for (const change of changes) {
    const [before, after] = fileSides(change);
    if (!before && !after) continue;
    if (before?.type === 'file' && after?.type === 'file' && before.digest === after.digest)
      continue;
    const [oldText, newText] = await Promise.all([textOf(store, before), textOf(store, after)]);
    if (oldText === undefined || newText === undefined) continue;
    for (const run of lineRuns(linesOf(oldText), linesOf(newText))) {
      if (run.added) counts.linesAdded += run.lines.length;
      else if (run.removed) counts.linesRemoved += run.lines.length;
    }
  }
  return counts;
}
