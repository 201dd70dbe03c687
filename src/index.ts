/**
 * Rewind's public API: everything a program, the CLI, the MCP server and the framework adapters
 * may use. Anything exported here is public; exports are named, never `export *`.
 */
export { ERROR_CODES, type ErrorCode, isRewindError, RewindError } from './errors.js';
export {
  checkEnvelope,
  ENTRY_KINDS,
  type EntryKind,
  LEDGER_FORMAT_VERSION,
  Ledger,
  type LedgerEntry,
  type LedgerReading,
  readLedgerFile,
  type SessionFile,
} from './ledger/index.js';
export {
  canonicalJson,
  type Digest,
  digestBytes,
  digestFile,
  normalizeWorkspacePath,
  REWIND_VERSION,
  resolveWorkspacePath,
} from './lib/index.js';
export {
  type CheckpointInfo,
  type CheckpointResult,
  type DiffResult,
  type GcReport,
  gc,
  type InitResult,
  init,
  type LogLine,
  type LogReport,
  locateWorkspace,
  log,
  type NoteResult,
  note,
  type OpenSessionOptions,
  openSession,
  type PlannedChange,
  type RollbackResult,
  Session,
  type SessionSummary,
  type StatusReport,
  status,
  type UndoResult,
  type VerifyProblem,
  type VerifyReport,
  verify,
  type WorkspaceOptions,
} from './session/index.js';
export {
  createObjectStore,
  decodeTree,
  encodeTree,
  type ObjectInfo,
  type ObjectReference,
  type ObjectSource,
  type ObjectStore,
  putTree,
  readTree,
  STORE_DIRECTORY_NAME,
  type Tree,
  type TreeEntry,
} from './store/index.js';
export {
  type ApplyProgress,
  type ApplyResult,
  applyChanges,
  diffTrees,
  IGNORE_FILE,
  renderDiff,
  type SnapshotOptions,
  type SnapshotResult,
  snapshot,
  type TreeChange,
} from './workspace/index.js';
