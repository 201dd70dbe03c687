export {
  syncPath,
  syncPaths,
  temporaryPathBeside,
  writeFileAtomic,
} from './atomic-write.js';
export { nodeCrypto, nodeNet, nodeZlib, workerThreads } from './builtins.js';
export { canonicalJson, type JsonValue } from './canonical-json.js';
export {
  createLimiter,
  createOrderedWindow,
  forEachConcurrently,
  type Limiter,
  MAX_TIMER_MS,
  timerDelayOf,
} from './concurrency.js';
export { readAt, writeAll, writeAllTo } from './descriptor-io.js';
export {
  createDigester,
  DIGEST_LENGTH,
  DIGEST_PREFIX,
  type Digest,
  digestBytes,
  digestFile,
  isDigest,
  isDigestCold,
  STREAM_CHUNK_BYTES,
} from './digest.js';
export { type JsonLines, parseJsonLines, type UnreadableLine } from './jsonl.js';
export {
  type AcquireLockOptions,
  acquireLock,
  isHolderAlive,
  isHolderStopped,
  type Lock,
  type LockHolder,
  type LockWait,
  liveHolderOf,
  withLock,
} from './lock.js';
export {
  type GuardedServer,
  generateToken,
  type HttpEndpoint,
  type HttpRefusal,
  isLoopbackHost,
  refusalOfRequest,
} from './loopback-guard.js';
export {
  compareNames,
  decodeName,
  diskPath,
  displayPath,
  hasEscapedBytes,
  listNames,
  nameBytes,
  readLinkSync,
  readNamesSync,
} from './names.js';
export {
  isOpenedAt,
  normalizeWorkspacePath,
  pathOfDescriptor,
  resolveWorkspacePath,
  WorkspaceDirectories,
} from './paths.js';
export {
  isAbsentSync,
  kindOf,
  type Opened,
  openPlainFile,
  readPlainFile,
  readPlainFileSync,
} from './plain-file.js';
export { type ProgramResult, runProgram } from './programs.js';
export {
  createRedactor,
  REDACTED,
  REDACTION_LOOKAHEAD_BYTES,
  type Redacted,
  type RedactionOptions,
  type Redactor,
  SENSITIVE_HEADERS,
  withoutUrlPasswords,
} from './redact.js';
export { clipped, jsonPreview, namedAndMore, textOf } from './text.js';
export { checkUserFile, writeUserFile } from './user-file.js';
export { REWIND_VERSION } from './version.js';
