// The filesystem a benchmark's files are on, said with its results: file creation and removal
// costs depend on it more than on anything a build changes. Above all, ext4 without a journal
// (this project's VM has its root filesystem so) checks every inode it could give a new file
// against those deleted in the last seconds (`recently_deleted` in fs/ext4/ialloc.c, skipped
// when there is a journal): after a step that deleted many files, creating many costs several
// times what it does on the journaled ext4 people have, and varies with what ran just before.
import { readFileSync, realpathSync } from 'node:fs';
import { basename } from 'node:path';

/** Undoes the octal escapes of /proc/self/mountinfo (`\040` for a space). */
const unescaped = (field) =>
  field.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(Number.parseInt(octal, 8)));

/**
 * The mount that holds `path`: its type, its source, and for ext4 whether it has a journal
 * (undefined where that cannot be read).
 */
export function filesystemOf(path) {
  const real = realpathSync(path);
  let best;
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    if (!right) continue;
    const point = unescaped(left.split(' ')[4]);
    const isUnder = real === point || real.startsWith(point === '/' ? '/' : `${point}/`);
    if (!isUnder || (best && best.point.length > point.length)) continue;
    const [type, source] = right.split(' ');
    best = { point, type, source: unescaped(source) };
  }
  if (best?.type === 'ext4') {
    try {
      const device = basename(realpathSync(best.source));
      best.hasJournal =
        readFileSync(`/sys/fs/ext4/${device}/journal_task`, 'utf8').trim() !== '<none>';
    } catch {}
  }
  return best;
}

/** A line for a benchmark's output: where its files are, and a warning where it matters. */
export function describeFilesystem(path) {
  const found = filesystemOf(path);
  if (!found) return `Files under ${path} (filesystem unknown).`;
  const journal =
    found.hasJournal === undefined
      ? ''
      : found.hasJournal
        ? ', with a journal'
        : ', WITHOUT a journal';
  const line = `Files under ${path}: ${found.type} on ${found.source} (mounted at ${found.point}${journal}).`;
  if (found.hasJournal !== false) return line;
  return (
    `${line}\nWarning: ext4 without a journal checks each new inode against those deleted in the ` +
    'last seconds, so creating many files after deleting many (a rollback, git restore, cp -a ' +
    'back) costs several times what it does on a journaled ext4, and varies from run to run. ' +
    'Point BENCH_DIR at a journaled filesystem for the numbers people see (docs/performance.md).'
  );
}
