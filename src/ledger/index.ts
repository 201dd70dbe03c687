export {
  checkEnvelope,
  describeEntry,
  digestEntry,
  ENTRY_KINDS,
  type EntryKind,
  encodeEntry,
  isKnownEntryKind,
  LEDGER_FORMAT_VERSION,
  type LedgerEntry,
} from './entry.js';
export {
  type AppendCheck,
  findUnsupportedEntry,
  generateSessionId,
  Ledger,
  type LedgerOptions,
  type LedgerReading,
  readLedgerFile,
  type SessionFile,
  sessionFileOf,
  unsupportedEntryError,
} from './ledger.js';
export {
  type CopyInResult,
  type CreateLedgerOptions,
  checkCopiedEntries,
  fileLedgers,
  type LedgerStore,
  type SessionLedger,
  sharedPrefixOf,
} from './ledger-store.js';
export {
  findSharedSession,
  listSharedSessions,
  PostgresLedger,
  type PostgresSession,
  postgresLedgers,
  type SharedSessionInfo,
  storeOfSharedSession,
} from './postgres.js';
export { migratePostgres, POSTGRES_SCHEMA_VERSION } from './postgres-client.js';
export {
  clearCurrentSession,
  listSessions,
  readCurrentSession,
  resolveSession,
  setCurrentSession,
} from './sessions.js';
export { checkLedger, type LedgerProblem } from './verify.js';
