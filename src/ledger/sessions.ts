import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import {
  compareNames,
  forEachConcurrently,
  openPlainFile,
  readPlainFile,
  writeFileAtomic,
} from '../lib/index.js';
import { type SessionFile, sessionFileOf } from './ledger.js';

const CURRENT_FILE = 'current';

/**
 * Every session in a store, in no set order, from the names of the files under `sessions/`
 * alone: what finding one by its id needs, without reading any ledger.
 */
export async function sessionFilesIn(storeDirectory: string): Promise<SessionFile[]> {
  let names: string[];
  try {
    names = await readdir(join(storeDirectory, 'sessions'));
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return [];
    throw error;
  }
  return names.flatMap((name) => {
    const session = name.endsWith('.jsonl') ? sessionFileOf(storeDirectory, name) : undefined;
    return session ? [session] : [];
  });
}

/** How many ledgers {@link listSessions} reads the start of at a time. */
const HEADS_AT_ONCE = 8;

/** Every session in a store, oldest first. */
export async function listSessions(storeDirectory: string): Promise<SessionFile[]> {
  const sessions = await sessionFilesIn(storeDirectory);
  const startedAt = new Map<string, string>();
  await forEachConcurrently(sessions, HEADS_AT_ONCE, async (session) => {
    startedAt.set(session.id, await readFirstTimestamp(session.file));
  });
  // In byte order (ISO timestamps, ids of letters and digits): the same order in every locale,
  // and no collator to set up (the first `localeCompare` of a process took ~9 ms here, a third
  // of what `rewind status` does beyond starting Node).
  return sessions.sort(
    (a, b) =>
      compareNames(startedAt.get(a.id) ?? '', startedAt.get(b.id) ?? '') ||
      compareNames(a.id, b.id),
  );
}

async function readFirstTimestamp(file: string): Promise<string> {
  try {
    // Never through a link, never waiting on a pipe: what is not a ledger sorts first.
    const opened = await openPlainFile(file);
    if (!opened.isFile) return '';
    const handle = opened.value;
    try {
      const buffer = Buffer.alloc(4096);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return /"at":"([^"]+)"/.exec(buffer.subarray(0, bytesRead).toString('utf8'))?.[1] ?? '';
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}

/** Where a session is looked for: a store directory, or its ledgers (files or a database). */
export type SessionSource = string | { names(): Promise<SessionFile[]> };

/**
 * Finds a session by its id, a unique prefix of it (4 characters or more), or its file name,
 * among the sessions' names only (no ledger is read, so it costs the same in a store of one
 * session or of thousands). Throws `SESSION_NOT_FOUND` or `SESSION_AMBIGUOUS`.
 */
export async function resolveSession(
  sessionsOf: SessionSource,
  query: string,
): Promise<SessionFile> {
  const sessions =
    typeof sessionsOf === 'string' ? await sessionFilesIn(sessionsOf) : await sessionsOf.names();
  const wanted = query.replace(/\.jsonl$/, '');
  const exact = sessions.find((session) => session.id === wanted || session.stem === wanted);
  if (exact) return exact;
  const matches = (
    wanted.length >= 4 ? sessions.filter((session) => session.id.startsWith(wanted)) : []
  ).sort((a, b) => compareNames(a.stem, b.stem));
  if (matches.length === 1 && matches[0]) return matches[0];
  if (matches.length > 1) {
    throw new RewindError(
      'SESSION_AMBIGUOUS',
      `"${query}" matches ${matches.length} sessions (${matches.map((session) => session.id).join(', ')}). Give more characters.`,
      { data: { session: query, matches: matches.map((session) => session.id) } },
    );
  }
  const short =
    wanted.length < 4 && sessions.some((session) => session.id.startsWith(wanted))
      ? ' A prefix of an id needs 4 characters or more.'
      : '';
  throw new RewindError(
    'SESSION_NOT_FOUND',
    `There is no session "${query}" in this store.${short} Run \`rewind session list\` to list the sessions.`,
    { data: { session: query } },
  );
}

/** The current session (the one commands use by default), or undefined when none is set. */
export async function readCurrentSession(
  storeDirectory: string,
  sessionsOf: SessionSource = storeDirectory,
): Promise<SessionFile | undefined> {
  const file = join(storeDirectory, CURRENT_FILE);
  let id: string;
  try {
    const read = await readPlainFile(file);
    if (!read.isFile) {
      throw new RewindError(
        'SESSION_NOT_FOUND',
        `${file} is ${read.kind}, not the file naming the current session, so there is no current session. ` +
          'Move it aside, then run `rewind session use ID` (`rewind session list` lists them), or name the session with --session.',
        { data: { file, kind: read.kind } },
      );
    }
    id = read.value.toString('utf8').trim();
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return undefined;
    throw error;
  }
  if (id === '') return undefined;
  return resolveSession(sessionsOf, id);
}

/**
 * Leaves the store with no current session if `session` is the current one (a destroyed
 * session cannot be used); returns whether it was.
 */
export async function clearCurrentSession(
  storeDirectory: string,
  session: SessionFile,
): Promise<boolean> {
  // Resolved among this session alone: whatever the store keeps its ledgers in.
  const sessionsOf = { names: async () => [session] };
  const current = await readCurrentSession(storeDirectory, sessionsOf).catch(() => undefined);
  if (current?.id !== session.id) return false;
  await rm(join(storeDirectory, CURRENT_FILE), { force: true });
  return true;
}

/** Makes `session` the current one. */
export async function setCurrentSession(
  storeDirectory: string,
  session: SessionFile,
): Promise<void> {
  await writeFileAtomic(join(storeDirectory, CURRENT_FILE), `${session.id}\n`);
}
