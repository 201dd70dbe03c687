export { type ApplyProgress, type ApplyResult, applyChanges } from './apply.js';
export { IGNORE_FILE } from './ignore-rules.js';
export { renderDiff } from './render-diff.js';
export {
  checkWorkspace,
  type SnapshotOptions,
  type SnapshotResult,
  snapshot,
} from './snapshot.js';
export { isIgnoredPath, type PathSnapshot, snapshotPath } from './snapshot-path.js';
export { cachedReferences, clearStatCache } from './stat-cache.js';
export {
  diffEntries,
  diffTrees,
  fileChangeKind,
  isSameEntry,
  type TreeChange,
} from './tree-diff.js';
