export {
  type ApplyProgress,
  type ApplyResult,
  applicationOrder,
  applyChanges,
  isAtOrUnder,
  isRemovedBeforePlacing,
  leftAloneOf,
  MAX_LISTED_SKIPPED,
  removeRestoreLeftovers,
  WRITES_AT_ONCE,
  workspaceRules,
} from './apply.js';
export { editsFrom } from './changed-since.js';
export type { CopySource } from './copy-source.js';
export {
  decodeOutsideRules,
  IGNORE_FILE,
  IGNORE_FILES,
  isRealDirectory,
  NO_OUTSIDE_RULES,
  type OutsideRules,
  readOutsideRules,
} from './ignore-rules.js';
export { type LeftOutListing, leftOutChanges, listLeftOut } from './left-out.js';
export { forgetUnkeptLineCounts, lineCountsBetween } from './line-counts.js';
export { isAtSpecialSync } from './on-disk.js';
export { previewSnapshot, type SnapshotPreview } from './preview.js';
export { countLineChanges, type LineCounts, renderDiff } from './render-diff.js';
export {
  checkWorkspace,
  type SnapshotOptions,
  type SnapshotResult,
  snapshot,
} from './snapshot.js';
export { isIgnoredPath, type PathSnapshot, snapshotPath } from './snapshot-path.js';
export { cachedReferences, clearStatCache, forgetUnkept, hasStatCache } from './stat-cache.js';
export {
  diffEntries,
  diffTrees,
  fileChangeKind,
  isSameEntry,
  type TreeChange,
} from './tree-diff.js';
export { exceptFor, type LeftOutCheck, treeRules } from './tree-rules.js';
export type { DirectorySize, SnapshotProgress } from './walk.js';
export { WorkspaceWatcher } from './watcher.js';
