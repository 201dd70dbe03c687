// Where a store's sessions keep their ledgers: files under `sessions/` (the default), or a
// PostgreSQL database (SPEC.md §5a). The session layer works with either through this surface.
import type { ObjectReference } from '../store/index.js';
import type { EntryKind, LedgerEntry } from './entry.js';
import {
  Ledger,
  type LedgerOptions,
  type LedgerReading,
  readLedgerFile,
  type SessionFile,
} from './ledger.js';
import { listSessions } from './sessions.js';

/** One session's ledger, open for appending: a file or a database's rows. */
export interface SessionLedger {
  readonly session: SessionFile;
  /** True when every entry carries the digest of the one before it. */
  readonly isHashChained: boolean;
  append(
    kind: EntryKind,
    body: Record<string, unknown>,
    refs?: readonly ObjectReference[],
  ): Promise<LedgerEntry>;
  read(): Promise<LedgerReading>;
  close(): Promise<void>;
}

/** How a new session's ledger starts. */
export interface CreateLedgerOptions extends LedgerOptions {
  hashChain?: boolean;
  generateId?: () => string;
  startedBody?: Record<string, unknown>;
}

/** The ledgers of a store's sessions. */
export interface LedgerStore {
  /** Every session, oldest first. */
  list(): Promise<SessionFile[]>;
  /** Everything one session's ledger holds, problems included. */
  read(session: SessionFile): Promise<LedgerReading>;
  /** Starts a new session with its `session-started` entry; the ledger is left open. */
  create(options: CreateLedgerOptions): Promise<SessionLedger>;
  /** Opens a session's ledger for appending. */
  open(session: SessionFile, options?: LedgerOptions): Promise<SessionLedger>;
}

/** The ledgers of a store kept as files under `sessions/`. */
export function fileLedgers(storeDirectory: string): LedgerStore {
  return {
    list: () => listSessions(storeDirectory),
    read: (session) => readLedgerFile(session.file),
    create: (options) => Ledger.create(storeDirectory, options),
    open: (session, options) => Ledger.open(session, options),
  };
}
