// Resuming a session on another machine from the shared backends (`rewind attach`).
import { readdir } from 'node:fs/promises';
import { RewindError } from '../errors.js';
import { findSharedSession, migratePostgres, setCurrentSession } from '../ledger/index.js';
import { withoutUrlPasswords } from '../lib/index.js';
import { initStore, isPostgresUrl, STORE_DIRECTORY_NAME } from '../store/index.js';
import type { RollbackResult } from './history/rollback.js';
import { openSession } from './open-session.js';
import { ledgersOf } from './session-files.js';

/** What {@link attachShared} did. */
export interface AttachResult {
  workspace: string;
  session: string;
  /** The store's id in the ledger database. */
  store: string;
  /** The checkpoint the workspace now holds, if the session had one. */
  checkpoint: string | undefined;
  restored: RollbackResult | undefined;
}

/**
 * Resumes on this machine a session whose ledger is in PostgreSQL and whose objects are in a
 * bucket: makes a store in `workspace` (an empty directory) on the same backends and under the
 * same store id, makes the session current, and brings the workspace to the session's last
 * checkpoint with a rollback (journaled in the shared ledger, so every machine sees where the
 * session went on). Throws `INVALID_ARGUMENT` for a directory that is not empty or a ledger that
 * is not a PostgreSQL URL, `SESSION_NOT_FOUND`, `SESSION_AMBIGUOUS`, `IO_FAILED`.
 */
export async function attachShared(options: {
  workspace: string;
  /** The session's id, or a unique prefix of it. */
  session: string;
  /** The PostgreSQL URL its ledger is in. */
  ledger: string;
  /** The bucket its objects are in (`s3://BUCKET/PREFIX`); without it, none can be restored. */
  objects?: string;
}): Promise<AttachResult> {
  if (!isPostgresUrl(options.ledger)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `--ledger must be the PostgreSQL URL the session's ledger is in (postgres://USER@HOST/DB), not ${JSON.stringify(withoutUrlPasswords(options.ledger))}.`,
      { data: {} },
    );
  }
  const names = await readdir(options.workspace).catch(() => [] as string[]);
  if (names.length > 0) {
    const what = names.includes(STORE_DIRECTORY_NAME)
      ? 'already has a Rewind store'
      : 'is not empty';
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${options.workspace} ${what}: attach into an empty directory, where the session's last checkpoint is restored.`,
      { data: { workspace: options.workspace } },
    );
  }
  await migratePostgres(options.ledger);
  const { store, id } = await findSharedSession(options.ledger, options.session);
  const location = await initStore(options.workspace, {
    ledger: options.ledger,
    store,
    ...(options.objects !== undefined && { objects: options.objects }),
  });
  const session = (await ledgersOf(location).list()).find((listed) => listed.id === id);
  if (!session) {
    throw new RewindError('SESSION_NOT_FOUND', `Session ${id} vanished from the database.`, {
      data: { session: id },
    });
  }
  await setCurrentSession(location.directory, session);
  const opened = await openSession({ workspace: location.workspace, session: id });
  try {
    const checkpoints = await opened.checkpoints();
    const last = checkpoints.at(-1)?.label;
    const restored = last === undefined ? undefined : await opened.rollback(last);
    return { workspace: location.workspace, session: id, store, checkpoint: last, restored };
  } finally {
    await opened.close();
  }
}
