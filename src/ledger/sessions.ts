import { open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { writeFileAtomic } from '../lib/index.js';
import { type SessionFile, sessionFileOf } from './ledger.js';

const CURRENT_FILE = 'current';

/** Every session in a store, oldest first. */
export async function listSessions(storeDirectory: string): Promise<SessionFile[]> {
  let names: string[];
  try {
    names = await readdir(join(storeDirectory, 'sessions'));
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return [];
    throw error;
  }
  const sessions = names.flatMap((name) => {
    const session = name.endsWith('.jsonl') ? sessionFileOf(storeDirectory, name) : undefined;
    return session ? [session] : [];
  });
  const startedAt = new Map<string, string>();
  for (const session of sessions) startedAt.set(session.id, await readFirstTimestamp(session.file));
  return sessions.sort(
    (a, b) =>
      (startedAt.get(a.id) ?? '').localeCompare(startedAt.get(b.id) ?? '') ||
      a.id.localeCompare(b.id),
  );
}

async function readFirstTimestamp(file: string): Promise<string> {
  try {
    const handle = await open(file, 'r');
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

/**
 * Finds a session by its id, a unique prefix of it (4 characters or more), or its file name.
 * Throws `SESSION_NOT_FOUND` or `SESSION_AMBIGUOUS`.
 */
export async function resolveSession(storeDirectory: string, query: string): Promise<SessionFile> {
  const sessions = await listSessions(storeDirectory);
  const wanted = query.replace(/\.jsonl$/, '');
  const exact = sessions.find((session) => session.id === wanted || session.stem === wanted);
  if (exact) return exact;
  const matches =
    wanted.length >= 4 ? sessions.filter((session) => session.id.startsWith(wanted)) : [];
  if (matches.length === 1 && matches[0]) return matches[0];
  if (matches.length > 1) {
    throw new RewindError(
      'SESSION_AMBIGUOUS',
      `"${query}" matches ${matches.length} sessions (${matches.map((session) => session.id).join(', ')}). Give more characters.`,
      { data: { session: query, matches: matches.map((session) => session.id) } },
    );
  }
  throw new RewindError(
    'SESSION_NOT_FOUND',
    `There is no session "${query}" in this store. Run \`rewind session list\` to list the sessions.`,
    { data: { session: query } },
  );
}

/** The current session (the one commands use by default), or undefined when none is set. */
export async function readCurrentSession(storeDirectory: string): Promise<SessionFile | undefined> {
  let id: string;
  try {
    id = (await readFile(join(storeDirectory, CURRENT_FILE), 'utf8')).trim();
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return undefined;
    throw error;
  }
  if (id === '') return undefined;
  return resolveSession(storeDirectory, id);
}

/** Makes `session` the current one. */
export async function setCurrentSession(
  storeDirectory: string,
  session: SessionFile,
): Promise<void> {
  await writeFileAtomic(join(storeDirectory, CURRENT_FILE), `${session.id}\n`);
}
