import { hostname } from 'node:os';
import { RewindError } from '../errors.js';
import {
  fileLedgers,
  type LedgerStore,
  postgresLedgers,
  readCurrentSession,
  resolveSession,
  type SessionFile,
  type SessionLedger,
} from '../ledger/index.js';
import { createRedactor, REWIND_VERSION } from '../lib/index.js';
import type { StoreLocation } from '../store/index.js';
import { type ProtectionOptions, startedFieldsOf } from './protections.js';

/** Where the store's sessions keep their ledgers: `sessions/`, or the database its config names. */
export function ledgersOf(location: StoreLocation): LedgerStore {
  return location.ledger
    ? postgresLedgers(location.ledger.url, location.ledger.store)
    : fileLedgers(location.directory);
}

/**
 * The ledger of a session: `session` (an id, a unique prefix or a file name), else the current
 * one. Throws `SESSION_NOT_FOUND`, `SESSION_AMBIGUOUS`.
 */
export async function pickSession(
  location: StoreLocation,
  session: string | undefined,
): Promise<SessionFile> {
  const ledgers = ledgersOf(location);
  if (session !== undefined) return resolveSession(ledgers, session);
  const current = await readCurrentSession(location.directory, ledgers);
  if (current) return current;
  throw new RewindError(
    'SESSION_NOT_FOUND',
    'This store has no current session. Pass --session ID (`rewind session list` lists them), or start one with `rewind session new`.',
    { data: {} },
  );
}

/** How {@link startLedger} starts a session. */
export interface StartOptions extends ProtectionOptions {
  hashChain?: boolean;
  now?: () => Date;
  generateId?: () => string;
  /** Where its commands run (`bwrap`, `none`, `auto`), when given. */
  sandbox?: string;
  /** Whether sandboxed commands may use the network, when given. */
  network?: boolean;
  isolation?: 'isolated';
  /** What started it, for finding it again (`mcp`: `rewind mcp --isolated`). */
  startedBy?: string;
}

/**
 * Starts a session's ledger with its `session-started` entry (who, where, and what was asked of
 * the session); the ledger is left open.
 */
export function startLedger(
  location: StoreLocation,
  options: StartOptions,
): Promise<SessionLedger> {
  // A redaction pattern that does not compile is refused before it is recorded.
  createRedactor(options.redact);
  return ledgersOf(location).create({
    hashChain: options.hashChain === true,
    ...(options.now && { now: options.now }),
    ...(options.generateId && { generateId: options.generateId }),
    startedBody: {
      rewindVersion: REWIND_VERSION,
      workspace: location.workspace,
      host: hostname(),
      pid: process.pid,
      ...(options.isolation && { isolation: options.isolation }),
      ...(options.sandbox && { sandbox: options.sandbox }),
      ...(options.network !== undefined && { network: options.network }),
      ...(options.startedBy !== undefined && { startedBy: options.startedBy }),
      ...startedFieldsOf(options),
    },
  });
}
