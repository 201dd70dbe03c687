// A session's ledger in PostgreSQL: one row per entry, holding the entry's line exactly as the
// file ledger writes it, so readers, the hash chain and `verify` are the same (SPEC.md §5a).
import { RewindError } from '../errors.js';
import { createLimiter } from '../lib/index.js';
import type { ObjectReference } from '../store/index.js';
import {
  checkEntryKind,
  checkEnvelope,
  type EntryKind,
  encodeEntry,
  encodeNewEntry,
  entryAfter,
  type LedgerEntry,
} from './entry.js';
import {
  type AppendCheck,
  findUnsupportedEntry,
  generateSessionId,
  type LedgerOptions,
  type LedgerReading,
  type SessionFile,
  unsupportedEntryError,
} from './ledger.js';
import {
  type CopyInResult,
  checkCopiedEntries,
  type LedgerStore,
  sharedPrefixOf,
} from './ledger-store.js';
import {
  databaseFailed,
  inTransaction,
  isConnectionLost,
  type Pool,
  poolOf,
  releasePool,
  selectRows,
  shownUrl,
  withPool,
} from './postgres-client.js';

/** How many times an append is tried when the connection is lost. */
const APPEND_ATTEMPTS = 4;

/** Where a session's ledger lives in a database. */
export interface PostgresSession {
  url: string;
  /** The store the session belongs to (the workspace's store id): sessions of many stores share the tables. */
  store: string;
  id: string;
}

/**
 * One session's ledger in PostgreSQL, with the file ledger's surface: `append` resolves once the
 * entry is committed, `read` returns every entry (parsing only those appended since the previous
 * read), `close` waits for pending appends. `seq` is allocated in the append's transaction under
 * the session row's lock (`SELECT ... FOR UPDATE`), so writers on any number of machines never
 * collide or leave a gap; the primary key would refuse a duplicate anyway. An append's `check`
 * runs in that same transaction, under that lock, on every entry then committed: a writer that
 * appends meanwhile waits for the lock, so what the check saw is still the whole ledger when the
 * entry is inserted. Each row holds the entry's line as the file ledger writes it: the hash chain
 * and `verify` are unchanged.
 */
export class PostgresLedger {
  /** The session as every ledger names it; `file` says where it lives, for people. */
  readonly session: SessionFile;
  readonly location: PostgresSession;
  readonly isHashChained: boolean;
  readonly #pool: Pool;
  readonly #now: () => Date;
  /** Appends run one at a time, in the order they were asked for. */
  readonly #serial = createLimiter(1);
  readonly #entries: LedgerEntry[] = [];
  #isClosed = false;

  private constructor(
    location: PostgresSession,
    startedAt: string,
    pool: Pool,
    isHashChained: boolean,
    options: LedgerOptions,
  ) {
    this.location = location;
    this.session = sessionNameOf(location, startedAt);
    this.#pool = pool;
    this.isHashChained = isHashChained;
    this.#now = options.now ?? (() => new Date());
  }

  /** Starts a new session of `store` in the database and appends its `session-started` entry. */
  static async create(
    url: string,
    store: string,
    options: LedgerOptions & {
      hashChain?: boolean;
      generateId?: () => string;
      startedBody?: Record<string, unknown>;
    } = {},
  ): Promise<PostgresLedger> {
    const id = (options.generateId ?? generateSessionId)();
    const pool = await poolOf(url);
    const startedAt = (options.now ?? (() => new Date()))();
    const ledger = new PostgresLedger(
      { url, store, id },
      startedAt.toISOString(),
      pool,
      options.hashChain === true,
      options,
    );
    try {
      await pool.query(
        'INSERT INTO rewind_sessions (store, session, started_at) VALUES ($1, $2, $3)',
        [store, id, startedAt],
      );
      await ledger.append('session-started', {
        ...options.startedBody,
        hashChain: options.hashChain === true,
      });
    } catch (error) {
      await ledger.close();
      if (error instanceof RewindError) throw error;
      throw databaseFailed(error, url, `Starting session ${id}`);
    }
    return ledger;
  }

  /** Opens an existing session. Throws `SESSION_NOT_FOUND`, `LEDGER_CORRUPT`, `IO_FAILED`. */
  static async open(
    url: string,
    store: string,
    id: string,
    options: LedgerOptions = {},
  ): Promise<PostgresLedger> {
    const pool = await poolOf(url);
    try {
      const entries = await fetchEntries(pool, { url, store, id }, 0);
      const started = entries[0];
      if (started === undefined) {
        throw new RewindError(
          'SESSION_NOT_FOUND',
          `No session ${id} of store ${store} in ${shownUrl(url)}. Run \`rewind session list\` to list the sessions.`,
          { data: { session: id, store } },
        );
      }
      if (started.kind !== 'session-started') {
        throw new RewindError(
          'LEDGER_CORRUPT',
          `Session ${id} in ${shownUrl(url)} does not begin with a session-started entry.`,
          { data: { session: id, seq: started.seq } },
        );
      }
      const unsupported = findUnsupportedEntry(entries);
      if (unsupported)
        throw unsupportedEntryError(sessionNameOf({ url, store, id }, started.at), unsupported);
      const isHashChained = started.body.hashChain === true;
      const ledger = new PostgresLedger(
        { url, store, id },
        started.at,
        pool,
        isHashChained,
        options,
      );
      ledger.#entries.push(...entries);
      return ledger;
    } catch (error) {
      await releasePool(url);
      throw error;
    }
  }

  /**
   * Appends one entry; resolves once it is committed. See the class for how `seq` is chosen and
   * when `check` runs.
   */
  append(
    kind: EntryKind,
    body: Record<string, unknown>,
    refs?: readonly ObjectReference[],
    check?: AppendCheck,
  ): Promise<LedgerEntry> {
    return this.#serial(() => this.#appendNow(kind, body, refs, check));
  }

  async #appendNow(
    kind: EntryKind,
    body: Record<string, unknown>,
    refs: readonly ObjectReference[] | undefined,
    check: AppendCheck | undefined,
  ): Promise<LedgerEntry> {
    checkEntryKind(kind);
    const { store, id, url } = this.location;
    const at = this.#now().toISOString();
    // The lines of attempts whose answer was lost, by the seq each took: one that committed is
    // at its seq, whatever other writers appended after it.
    const attempted: { seq: number; line: string }[] = [];
    for (let attempt = 1; ; attempt++) {
      try {
        return await inTransaction(this.#pool, async (client) => {
          const locked = await client.query<{ last_seq: string }>(
            'SELECT last_seq FROM rewind_sessions WHERE store = $1 AND session = $2 FOR UPDATE',
            [store, id],
          );
          if (locked.rows.length === 0) {
            throw new RewindError('SESSION_NOT_FOUND', `No session ${id} of store ${store}.`, {
              data: { session: id, store },
            });
          }
          const lastSeq = Number(locked.rows[0]?.last_seq ?? 0);
          for (const tried of attempted) {
            if (tried.seq > lastSeq) continue;
            const { rows } = await client.query<{ line: string }>(
              'SELECT line FROM rewind_entries WHERE store = $1 AND session = $2 AND seq = $3',
              [store, id, tried.seq],
            );
            if (rows[0]?.line === tried.line) return parseLine(tried.line, id, tried.seq);
          }
          if (check) {
            // Read under the lock: every entry committed before it, none after.
            const after = this.#entries.at(-1)?.seq ?? 0;
            const { rows } = await client.query<{ seq: string; line: string }>(
              'SELECT seq, line FROM rewind_entries WHERE store = $1 AND session = $2 AND seq > $3 ORDER BY seq',
              [store, id, after],
            );
            this.#keep(rows.map((row) => parseLine(row.line, id, Number(row.seq))));
            await check([...this.#entries]);
          }
          let last: LedgerEntry | undefined;
          if (lastSeq > 0) {
            const { rows } = await client.query<{ line: string }>(
              'SELECT line FROM rewind_entries WHERE store = $1 AND session = $2 AND seq = $3',
              [store, id, lastSeq],
            );
            last = parseLine(rows[0]?.line ?? '', id, lastSeq);
          }
          const entry = entryAfter(
            last,
            { kind, body, at, ...(refs && { refs }) },
            this.isHashChained,
            {
              where: `of session ${id} in ${shownUrl(url)}`,
              repair: 'restore its rows from a backup',
              data: { session: id },
            },
          );
          const line = encodeNewEntry(entry);
          attempted.push({ seq: entry.seq, line });
          await client.query(
            'INSERT INTO rewind_entries (store, session, seq, line) VALUES ($1, $2, $3, $4)',
            [store, id, entry.seq, line],
          );
          await client.query(
            'UPDATE rewind_sessions SET last_seq = $3 WHERE store = $1 AND session = $2',
            [store, id, entry.seq],
          );
          return entry;
        });
      } catch (error) {
        if (error instanceof RewindError) throw error;
        if (attempt < APPEND_ATTEMPTS && isConnectionLost(error)) {
          await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
          continue;
        }
        throw databaseFailed(error, url, `Appending to session ${id}`);
      }
    }
  }

  /** Every entry of the session, in order; only rows appended since the previous read are fetched. */
  async read(): Promise<LedgerReading> {
    const after = this.#entries.at(-1)?.seq ?? 0;
    this.#keep(await fetchEntries(this.#pool, this.location, after));
    return {
      entries: [...this.#entries],
      unreadable: [],
      endsMidLine: false,
      damagedLastLine: undefined,
    };
  }

  /**
   * Adds fetched entries to those read before, leaving out any that a read or a checked append
   * running at the same time added first.
   */
  #keep(fetched: readonly LedgerEntry[]): void {
    const last = this.#entries.at(-1)?.seq ?? 0;
    this.#entries.push(...fetched.filter((entry) => entry.seq > last));
  }

  /** Waits for pending appends and gives the connection pool back. */
  async close(): Promise<void> {
    await this.#serial(async () => {});
    if (this.#isClosed) return;
    this.#isClosed = true;
    await releasePool(this.location.url);
  }
}

/**
 * The store and id of the session `query` names in a database (its id, or a unique prefix of 4
 * characters or more), whatever store it belongs to: what `rewind attach` starts from on a
 * machine that has none. Throws `SESSION_NOT_FOUND`, `SESSION_AMBIGUOUS`, `IO_FAILED`.
 */
export async function findSharedSession(
  url: string,
  query: string,
): Promise<{ store: string; id: string }> {
  const rows = await selectRows<{ store: string; session: string }>(
    url,
    `Looking for session ${query}`,
    'SELECT store, session FROM rewind_sessions WHERE session = $1 OR (length($1) >= 4 AND starts_with(session, $1)) ORDER BY session',
    [query],
  );
  const found =
    rows.find((row) => row.session === query) ?? (rows.length === 1 ? rows[0] : undefined);
  if (found) return { store: found.store, id: found.session };
  if (rows.length > 1) {
    throw new RewindError(
      'SESSION_AMBIGUOUS',
      `"${query}" matches ${rows.length} sessions in ${shownUrl(url)} (${rows.map((row) => row.session).join(', ')}). Give more characters.`,
      { data: { session: query, matches: rows.map((row) => row.session) } },
    );
  }
  throw new RewindError(
    'SESSION_NOT_FOUND',
    `There is no session "${query}" in ${shownUrl(url)}. \`rewind session list\` on the machine that started it names its id.`,
    { data: { session: query } },
  );
}

/** A session in a shared ledger database, as {@link listSharedSessions} finds it. */
export interface SharedSessionInfo {
  id: string;
  /** The store it belongs to in the database. */
  store: string;
  startedAt: string;
  /** When its newest entry was written. */
  lastAt: string;
  entryCount: number;
  /** The machine and the workspace it was started in, as its first entry says. */
  host: string | undefined;
  workspace: string | undefined;
  isHashChained: boolean;
  isIsolated: boolean;
}

/**
 * The sessions in a database, of every store, most recently written first (at most `limit`):
 * all, or those whose id starts with `query` or whose host or workspace holds it (case
 * ignored). What `rewind session find` lists, to pick one to attach or pull. Throws `IO_FAILED`.
 */
export async function listSharedSessions(
  url: string,
  options: { query?: string; limit?: number } = {},
): Promise<SharedSessionInfo[]> {
  const rows = await selectRows<{
    store: string;
    session: string;
    last_seq: string;
    first: string;
    last: string;
  }>(
    url,
    'Listing the shared sessions',
    `SELECT s.store, s.session, s.last_seq, f.line AS first, l.line AS last
       FROM rewind_sessions s
       JOIN rewind_entries f ON f.store = s.store AND f.session = s.session AND f.seq = 1
       JOIN rewind_entries l ON l.store = s.store AND l.session = s.session AND l.seq = s.last_seq
      WHERE $1 = ''
         OR starts_with(s.session, lower($1))
         OR strpos(lower(coalesce(f.line::jsonb #>> '{body,host}', '')), lower($1)) > 0
         OR strpos(lower(coalesce(f.line::jsonb #>> '{body,workspace}', '')), lower($1)) > 0
      ORDER BY l.line::jsonb ->> 'at' DESC, s.session
      LIMIT $2`,
    [options.query ?? '', options.limit ?? 100],
  );
  return rows.map((row) => {
    const first = parseLine(row.first, row.session, 1);
    const last = parseLine(row.last, row.session, Number(row.last_seq));
    const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
    return {
      id: row.session,
      store: row.store,
      startedAt: first.at,
      lastAt: last.at,
      entryCount: Number(row.last_seq),
      host: text(first.body.host),
      workspace: text(first.body.workspace),
      isHashChained: first.body.hashChain === true,
      isIsolated: first.body.isolation === 'isolated',
    };
  });
}

/** A session in a database as every ledger names it: `file` is where it lives, for people. */
function sessionNameOf({ url, store, id }: PostgresSession, startedAt: string): SessionFile {
  return { id, stem: `${startedAt.slice(0, 10)}_${id}`, file: `${shownUrl(url)}#${store}/${id}` };
}

/** A store's sessions in a database, oldest first. */
async function listDatabaseSessions(url: string, store: string): Promise<SessionFile[]> {
  return (
    await selectRows<{ session: string; started_at: Date }>(
      url,
      'Listing the sessions',
      'SELECT session, started_at FROM rewind_sessions WHERE store = $1 ORDER BY started_at, session',
      [store],
    )
  ).map((row) => sessionNameOf({ url, store, id: row.session }, row.started_at.toISOString()));
}

/**
 * The ledgers of a store's sessions in a database (SPEC.md §5a); see {@link PostgresLedger}.
 * `store` tells this store's sessions from other stores' in the same tables.
 */
export function postgresLedgers(url: string, store: string): LedgerStore {
  return {
    list: () => listDatabaseSessions(url, store),
    // One query either way: the database names them as cheaply as it lists them.
    names: () => listDatabaseSessions(url, store),
    read: (session) =>
      withPool(url, async (pool) => ({
        entries: await fetchEntries(pool, { url, store, id: session.id }, 0),
        unreadable: [],
        endsMidLine: false,
        damagedLastLine: undefined,
      })),
    create: (options) => PostgresLedger.create(url, store, options),
    open: (session, options) => PostgresLedger.open(url, store, session.id, options),
    copyIn: (id, entries) =>
      withPool(url, (pool) => copyIntoDatabase(pool, { url, store, id }, entries)),
    revision: async () =>
      (
        await selectRows<{ revision: string | null }>(
          url,
          'Reading the sessions',
          "SELECT string_agg(session || ':' || last_seq, '|' ORDER BY session) AS revision FROM rewind_sessions WHERE store = $1",
          [store],
        )
      )[0]?.revision ?? '',
  };
}

/**
 * {@link LedgerStore.copyIn} for a database: one transaction that makes the session's row if it
 * is missing, locks it as an append does, compares the rows with `entries`, and inserts those it
 * lacks, each with its line exactly as given.
 */
async function copyIntoDatabase(
  pool: Pool,
  location: PostgresSession,
  entries: readonly LedgerEntry[],
): Promise<CopyInResult> {
  const { url, store, id } = location;
  checkCopiedEntries(id, entries);
  const started = entries[0] as LedgerEntry;
  try {
    return await inTransaction(pool, async (client) => {
      await client.query(
        'INSERT INTO rewind_sessions (store, session, started_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [store, id, started.at],
      );
      await client.query(
        'SELECT last_seq FROM rewind_sessions WHERE store = $1 AND session = $2 FOR UPDATE',
        [store, id],
      );
      const { rows } = await client.query<{ seq: string; line: string }>(
        'SELECT seq, line FROM rewind_entries WHERE store = $1 AND session = $2 ORDER BY seq',
        [store, id],
      );
      const held = rows.map((row) => parseLine(row.line, id, Number(row.seq)));
      const shared = sharedPrefixOf(id, held, entries);
      const missing = entries.slice(shared);
      if (missing.length > 0) {
        await client.query(
          'INSERT INTO rewind_entries (store, session, seq, line) SELECT $1, $2, * FROM unnest($3::bigint[], $4::text[])',
          [
            store,
            id,
            missing.map((entry) => entry.seq),
            missing.map((entry) => encodeEntry(entry)),
          ],
        );
        await client.query(
          'UPDATE rewind_sessions SET last_seq = $3 WHERE store = $1 AND session = $2',
          [store, id, (missing.at(-1) as LedgerEntry).seq],
        );
      }
      return {
        session: sessionNameOf(location, started.at),
        appended: missing.length,
        ahead: held.length - shared,
      };
    });
  } catch (error) {
    if (error instanceof RewindError) throw error;
    throw databaseFailed(error, url, `Copying session ${id}`);
  }
}

/**
 * The store a session belongs to in the database, or undefined when it has no session `id`
 * (exactly that id: sessions are named by random ids, unique across stores).
 */
export async function storeOfSharedSession(url: string, id: string): Promise<string | undefined> {
  const rows = await selectRows<{ store: string }>(
    url,
    `Looking for session ${id}`,
    'SELECT store FROM rewind_sessions WHERE session = $1 ORDER BY store LIMIT 1',
    [id],
  );
  return rows[0]?.store;
}

/** The entries of a session after `after`, in order. */
async function fetchEntries(
  pool: Pool,
  { url, store, id }: PostgresSession,
  after: number,
): Promise<LedgerEntry[]> {
  let rows: { seq: string; line: string }[];
  try {
    ({ rows } = await pool.query<{ seq: string; line: string }>(
      'SELECT seq, line FROM rewind_entries WHERE store = $1 AND session = $2 AND seq > $3 ORDER BY seq',
      [store, id, after],
    ));
  } catch (error) {
    throw databaseFailed(error, url, `Reading session ${id}`);
  }
  return rows.map((row) => parseLine(row.line, id, Number(row.seq)));
}

/** An entry from its row's line; a line that is not one is damage, said with where it is. */
function parseLine(line: string, session: string, seq: number): LedgerEntry {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    value = undefined;
  }
  const problem = value === undefined ? 'it is not JSON' : checkEnvelope(value);
  if (problem !== undefined || (value as LedgerEntry).seq !== seq) {
    throw new RewindError(
      'LEDGER_CORRUPT',
      `Row #${seq} of session ${session} is not a ledger entry (${problem ?? 'its seq differs from the row'}). Nothing was written.`,
      { data: { session, seq } },
    );
  }
  return value as LedgerEntry;
}
