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
  type CreateLedgerOptions,
  fileLedgers,
  type LedgerStore,
  type SessionLedger,
} from './ledger-store.js';
export {
  findSharedSession,
  migratePostgres,
  POSTGRES_SCHEMA_VERSION,
  PostgresLedger,
  type PostgresSession,
  postgresLedgers,
} from './postgres.js';
export { listSessions, readCurrentSession, resolveSession, setCurrentSession } from './sessions.js';
export { checkLedger, type LedgerProblem } from './verify.js';
