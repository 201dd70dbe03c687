// Reaching PostgreSQL: the client library (loaded on first use), a pool per URL shared by a
// process's ledgers, transactions, errors that say what to check, and the schema (SPEC.md §5a).
import { RewindError } from '../errors.js';
import { withoutUrlPasswords } from '../lib/index.js';

/** The schema version `migrate` brings a database to. */
export const POSTGRES_SCHEMA_VERSION = 1;

/** The statements of each schema version, in order; `migrate` runs those not run yet. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE rewind_sessions (
     store text NOT NULL,
     session text NOT NULL,
     started_at timestamptz NOT NULL,
     last_seq bigint NOT NULL DEFAULT 0,
     PRIMARY KEY (store, session)
   );
   CREATE TABLE rewind_entries (
     store text NOT NULL,
     session text NOT NULL,
     seq bigint NOT NULL CHECK (seq >= 1),
     line text NOT NULL,
     PRIMARY KEY (store, session, seq),
     FOREIGN KEY (store, session) REFERENCES rewind_sessions (store, session)
   );`,
];

// The part of pg's API used here, declared here: the declarations Rewind ships never name 'pg',
// whose types (@types/pg) a user need not have installed.
type QueryResultRow = Record<string, unknown>;
interface Queryable {
  query<Row extends QueryResultRow = QueryResultRow>(
    sql: string,
    params?: unknown[],
  ): Promise<{ rows: Row[]; rowCount: number | null }>;
}
/** A connection taken from a {@link Pool}. */
export interface Client extends Queryable {
  on(event: 'error', listener: (error: Error) => void): unknown;
  off(event: 'error', listener: (error: Error) => void): unknown;
  /** Gives the connection back; `true` (it failed) closes it instead. */
  release(destroy?: boolean): void;
}
/** A pool of connections to one database. */
export interface Pool extends Queryable {
  connect(): Promise<Client>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}
interface PgModule {
  Pool: new (options: { connectionString: string; max: number; allowExitOnIdle: boolean }) => Pool;
}

/** The client library, loaded on first use: a program that never names a database never loads it. */
let pg: Promise<PgModule> | undefined;
const loadPg = async (): Promise<PgModule> => {
  // pg is CommonJS: its exports arrive as the default export of the ES module.
  pg ??= import('pg').then(
    (module) => (module as unknown as { default?: PgModule }).default ?? module,
  );
  return pg;
};

/** A URL with its password hidden, for messages. */
export const shownUrl = withoutUrlPasswords;

/** What went wrong talking to the database, as an error that says what to check. */
export function databaseFailed(error: unknown, url: string, doing: string): RewindError {
  const code = (error as { code?: string }).code;
  const message = error instanceof Error ? error.message : String(error);
  const advice =
    code === '28P01' || code === '28000'
      ? 'The server refused the credentials: check the user and password in the URL (or PGUSER and PGPASSWORD).'
      : code === '3D000'
        ? 'The database does not exist: create it (createdb), or name another in the URL.'
        : code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ECONNRESET'
          ? 'The server cannot be reached: check the host and port in the URL, and that it runs.'
          : 'Check the server and the URL, then retry; an entry not appended was not recorded.';
  return new RewindError(
    'IO_FAILED',
    `${doing} on ${shownUrl(url)} failed: ${message}. ${advice}`,
    { data: { url: shownUrl(url), ...(code && { code }) }, cause: error },
  );
}

/**
 * A pool per URL, shared by the ledgers of a process. Its user count is taken before the client
 * library loads, so callers at once share one pool. When the last user lets go, the pool stays
 * open {@link POOL_LINGER_MS} more, so a run of short uses (a status over many sessions, a page
 * polling for new entries) takes one connection instead of one each; its idle connections never
 * keep a process from exiting (`allowExitOnIdle`).
 */
const pools = new Map<
  string,
  { pool: Promise<Pool>; users: number; closing?: ReturnType<typeof setTimeout> }
>();

/** How long a pool no one uses stays open. */
const POOL_LINGER_MS = 5_000;

export function poolOf(url: string): Promise<Pool> {
  const known = pools.get(url);
  if (known) {
    known.users += 1;
    clearTimeout(known.closing);
    known.closing = undefined;
    return known.pool;
  }
  const pool = loadPg().then(({ Pool }) => {
    const created = new Pool({ connectionString: url, max: 4, allowExitOnIdle: true });
    // A connection the server dropped (a restart) errors while idle: the pool replaces it.
    created.on('error', () => {});
    return created;
  });
  pools.set(url, { pool, users: 1 });
  return pool;
}

export async function releasePool(url: string): Promise<void> {
  const known = pools.get(url);
  if (!known) return;
  known.users -= 1;
  if (known.users > 0) return;
  known.closing = setTimeout(() => {
    pools.delete(url);
    void known.pool.then((pool) => pool.end()).catch(() => {});
  }, POOL_LINGER_MS);
  known.closing.unref();
}

/** Runs `work` on the pool of `url`, taken for it and given back after. */
export async function withPool<T>(url: string, work: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = await poolOf(url);
  try {
    return await work(pool);
  } finally {
    await releasePool(url);
  }
}

/** The rows of one statement on the pool of `url`; a failure is said as `doing` failing. */
export function selectRows<Row extends QueryResultRow>(
  url: string,
  doing: string,
  sql: string,
  params: unknown[],
): Promise<Row[]> {
  return withPool(url, async (pool) => {
    try {
      return (await pool.query<Row>(sql, params)).rows;
    } catch (error) {
      throw databaseFailed(error, url, doing);
    }
  });
}

/** Runs `work` in a transaction on a connection of `pool`; rolls back when it throws. */
export async function inTransaction<T>(
  pool: Pool,
  work: (client: Client) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  // A connection the server ends while it is out of the pool reports it here, not unhandled.
  const ignore = () => {};
  client.on('error', ignore);
  let failed = false;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.off('error', ignore);
    // A connection that failed is not given back: the pool opens a new one.
    client.release(failed);
  }
}

/**
 * True for a failure of the connection rather than of the statement (the server restarted,
 * shut down, or the network dropped): the transaction did not commit, or its COMMIT's answer was
 * lost, so the append looks again before it retries.
 */
export function isConnectionLost(error: unknown): boolean {
  const code = (error as { code?: string }).code;
  return (
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03' ||
    code === 'ECONNRESET' ||
    code === 'ECONNREFUSED' ||
    code === 'EPIPE' ||
    (error instanceof Error &&
      /Connection terminated|connection timeout|not queryable/i.test(error.message))
  );
}

/**
 * Creates Rewind's tables in the database, or brings them to {@link POSTGRES_SCHEMA_VERSION}:
 * idempotent, and safe when several processes run it at once (an advisory lock serializes them).
 * Throws `STORE_VERSION_UNSUPPORTED` for a database a newer Rewind migrated, `IO_FAILED` when
 * the server cannot be reached or refuses.
 */
export async function migratePostgres(url: string): Promise<void> {
  try {
    await withPool(url, (pool) =>
      inTransaction(pool, async (client) => {
        await client.query("SELECT pg_advisory_xact_lock(hashtext('rewind-migrate'))");
        await client.query('CREATE TABLE IF NOT EXISTS rewind_schema (version integer NOT NULL)');
        const { rows } = await client.query<{ version: number }>(
          'SELECT max(version) AS version FROM rewind_schema',
        );
        const version = rows[0]?.version ?? 0;
        if (version > POSTGRES_SCHEMA_VERSION) {
          throw new RewindError(
            'STORE_VERSION_UNSUPPORTED',
            `The database ${shownUrl(url)} holds Rewind's tables at schema ${version}; this version knows ${POSTGRES_SCHEMA_VERSION}. Upgrade Rewind. Nothing was changed.`,
            { data: { version } },
          );
        }
        for (let next = version + 1; next <= POSTGRES_SCHEMA_VERSION; next++) {
          await client.query(MIGRATIONS[next - 1] as string);
          await client.query('INSERT INTO rewind_schema (version) VALUES ($1)', [next]);
        }
      }),
    );
  } catch (error) {
    if (error instanceof RewindError) throw error;
    throw databaseFailed(error, url, 'Creating the tables');
  }
}
