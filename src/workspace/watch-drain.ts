// What a watcher's drain hands to the snapshot that asked for it.
import type { BigIntStats } from 'node:fs';
import type { TreeEntry } from '../store/index.js';
import type { ChangeRecord } from './changes.js';

/** What a drain collected: the paths reported, the directories made or moved in among them. */
export interface Drained {
  changed: Set<string>;
  made: Set<string>;
  touched: Set<string>;
  written: Map<string, WrittenFile>;
  isWhole: boolean;
  /** The lstat of changed paths, taken once every event before the drain had arrived. */
  stats: Map<string, BigIntStats | null>;
}

/** A file this process wrote and moved into place: its stat then (`contentStatOf`), its entry. */
export interface WrittenFile {
  contentStat: string;
  entry: TreeEntry & { type: 'file' };
}

/** What `WorkspaceWatcher.drain` answers. */
export interface DrainResult {
  /** The paths that changed since the previous drain; undefined when that may not be whole. */
  paths: string[] | undefined;
  /** The record of the snapshot taken after the previous drain (see `setBase`). */
  base: ChangeRecord | undefined;
  token: number;
  /**
   * Files among `paths` this process wrote (see `WorkspaceWatcher.wrote`) to which nothing
   * happened since but being moved into place: still holding what was written if their stat
   * still says what it said (the same file, not another renamed over it).
   */
  written: ReadonlyMap<string, WrittenFile>;
  /**
   * The lstat of paths among `paths`, taken after every change made before the drain had been
   * reported (null: nothing is there), so that the snapshot need not take it again; a change
   * made since is the next drain's.
   */
  stats: ReadonlyMap<string, BigIntStats | null>;
}
