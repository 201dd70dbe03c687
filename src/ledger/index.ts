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
export { listSessions, readCurrentSession, resolveSession, setCurrentSession } from './sessions.js';
export { checkLedger, type LedgerProblem } from './verify.js';
