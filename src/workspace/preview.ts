// What a snapshot would take, told before it is taken: files, bytes, where they are, what is left out.
import { IgnoreRules, type OutsideRules, readOutsideRules } from './ignore-rules.js';
import { checkWorkspace } from './snapshot.js';
import { hasStatCache, StatCache } from './stat-cache.js';
import { type DirectorySize, largestDirectories, scanDirectory, summarize } from './walk.js';

/** What {@link previewSnapshot} found. */
export interface SnapshotPreview {
  fileCount: number;
  directoryCount: number;
  sizeBytes: number;
  /** The largest directories at the top of the workspace, up to five, largest first. */
  largest: DirectorySize[];
  /** What the rules leave out, topmost paths only (nothing under them is looked at): the first 20. */
  leftOut: string[];
  leftOutCount: number;
  /** True when the store holds no snapshot yet: the next one reads and stores every file. */
  isFirst: boolean;
}

/** How many paths a preview lists of what the rules leave out. */
const LISTED_LEFT_OUT = 20;

/**
 * Looks at a workspace as a snapshot would, without reading or storing any file: how many files
 * and bytes it would hold, the largest directories, and what the rules (git's, `.rewindignore`)
 * leave out. `storeDirectory` tells whether a snapshot was taken before; `outside` as for
 * `snapshot`. A path it cannot read is left out, as `snapshot` leaves it out (with a warning);
 * the workspace itself unreadable throws as `snapshot` does.
 */
export function previewSnapshot(
  workspace: string,
  options: { storeDirectory: string; outside?: OutsideRules },
): SnapshotPreview {
  const root = checkWorkspace(workspace);
  const ignored: string[] = [];
  const entries = scanDirectory(
    root,
    '',
    IgnoreRules.root(root, options.outside ?? readOutsideRules(root)),
    { cache: StatCache.empty(), warnings: [], ignoreDirectories: [], ignored, unreadable: [] },
  );
  const visible = ignored.filter((path) => !/(^|\/)\.(git|rewind)$/.test(path));
  return {
    ...summarize(entries),
    largest: largestDirectories(entries),
    leftOut: visible.slice(0, LISTED_LEFT_OUT),
    leftOutCount: visible.length,
    isFirst: !hasStatCache(options.storeDirectory),
  };
}
