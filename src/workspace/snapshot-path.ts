// Single-path snapshots and the ignore check of one path, for the few paths an action touches.
import { readlinkSync } from 'node:fs';
import { RewindError } from '../errors.js';
import type { Digest } from '../lib/index.js';
import type { ObjectBatch, TreeEntry } from '../store/index.js';
import { IgnoreRules, type OutsideRules, readOutsideRules } from './ignore-rules.js';
import { checkWorkspace } from './snapshot.js';
import { StatCache } from './stat-cache.js';
import {
  fileToRead,
  lstatEntry,
  type ScanContext,
  scanDirectory,
  storeFile,
  storeScannedTree,
  unreadable,
} from './walk.js';

/** The rules in force in the directory of `relative`; undefined when a directory above is left out. */
function rulesAbove(
  root: string,
  relative: string,
  outside: OutsideRules,
): IgnoreRules | undefined {
  let rules = IgnoreRules.root(root, outside);
  let directory = '';
  for (const part of relative.split('/').slice(0, -1)) {
    const next = directory === '' ? part : `${directory}/${part}`;
    if (rules.isIgnored(next, part, true)) return undefined;
    directory = next;
    rules = rules.enter(`${root}/${directory}`, directory);
  }
  return rules;
}

/**
 * True when snapshots leave `relative` out (git's rules, `.rewindignore`, `.git`, `.rewind`),
 * whether or not it exists: an action there could not be undone. `outside`: the rules from
 * outside the workspace (default: read from around it; see `SnapshotOptions.outside`).
 */
export function isIgnoredPath(
  workspace: string,
  relative: string,
  isDirectory: boolean,
  outside: OutsideRules = readOutsideRules(workspace),
): boolean {
  const rules = rulesAbove(workspace, relative, outside);
  return (
    rules === undefined ||
    rules.isIgnored(relative, relative.split('/').at(-1) as string, isDirectory)
  );
}

/** What {@link snapshotPath} found at one path. */
export interface PathSnapshot {
  /** The path's entry (a file's content, a directory's tree, a link's target); undefined if absent. */
  entry: TreeEntry | undefined;
  /**
   * Paths at or under it that the ignore rules leave out (and `.git`, `.rewind`): a snapshot of
   * the path does not hold them, so an action that removes them could not bring them back.
   */
  ignored: string[];
  /**
   * Paths under it that are not files, directories or links (FIFOs, sockets, devices): no
   * snapshot holds them either.
   */
  special: string[];
  warnings: string[];
}

/**
 * Records one path of a workspace (a file, a symbolic link, or a directory and everything under
 * it) in the store, as a full snapshot would, and returns its tree entry. Every file is read
 * (no stat cache): this is for the few paths an action touches. The caller commits `batch`.
 *
 * Throws `PATH_UNREADABLE` for what cannot be read; `relative` must already be resolved safely.
 */
export async function snapshotPath(
  workspace: string,
  relative: string,
  batch: ObjectBatch,
  outside?: OutsideRules,
): Promise<PathSnapshot> {
  const root = checkWorkspace(workspace);
  const name = relative.split('/').at(-1) as string;
  const rules = rulesAbove(root, relative, outside ?? readOutsideRules(root));
  if (rules === undefined)
    return { entry: undefined, ignored: [relative], special: [], warnings: [] };
  const absolute = `${root}/${relative}`;
  const stats = lstatEntry(absolute, relative);
  if (stats === undefined) return { entry: undefined, ignored: [], special: [], warnings: [] };
  if (rules.isIgnored(relative, name, stats.isDirectory())) {
    return { entry: undefined, ignored: [relative], special: [], warnings: [] };
  }
  const mode = Number(stats.mode) & 0o7777;
  if (stats.isSymbolicLink()) {
    try {
      return {
        entry: { name, type: 'symlink', target: readlinkSync(absolute) },
        ignored: [],
        special: [],
        warnings: [],
      };
    } catch (error) {
      throw unreadable(relative, error);
    }
  }
  const context: ScanContext = {
    cache: StatCache.empty(),
    warnings: [],
    ignoreDirectories: [],
    ignored: [],
    special: [],
  };
  if (stats.isDirectory()) {
    const entries = scanDirectory(absolute, relative, rules, context);
    const { digest } = await storeScannedTree(relative, mode, entries, context.cache, batch);
    return {
      entry: { name, type: 'directory', mode, digest },
      ignored: context.ignored ?? [],
      special: context.special ?? [],
      warnings: context.warnings,
    };
  }
  if (!stats.isFile()) {
    throw new RewindError(
      'PATH_CONFLICT',
      `${relative} is not a file, directory or symbolic link (a socket or device?): Rewind cannot keep a copy of it.`,
      { data: { path: relative } },
    );
  }
  const entry = fileToRead(name, relative, absolute, stats);
  await storeFile(entry, batch);
  return {
    entry: {
      name,
      type: 'file',
      mode: entry.mode,
      sizeBytes: entry.sizeBytes,
      digest: entry.payload as Digest,
    },
    ignored: [],
    special: [],
    warnings: [],
  };
}
