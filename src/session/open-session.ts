// The ways in: open a session, resume one, start an isolated one, run work in one.
import type { EndOptions, EndResult } from './isolation.js';
import type { IsolatedSessionOptions, OpenSessionOptions } from './open.js';
import { Session } from './session.js';

/**
 * Opens a session of a workspace that has a store (`init` makes one): the current session unless
 * `session` names another. Before returning, finishes any rollback or undo that a killed process
 * left half-done, so the workspace is in a state the ledger names.
 *
 * Throws `STORE_NOT_FOUND`, `SESSION_NOT_FOUND`, `LOCK_HELD`, and `ENTRY_KIND_UNKNOWN` /
 * `LEDGER_VERSION_UNSUPPORTED` for a session a newer Rewind wrote to.
 */
export function openSession(options: OpenSessionOptions): Promise<Session> {
  if (options.isolation === 'isolated' && options.session === undefined) {
    return Session.startIsolated(options);
  }
  return Session.open(options);
}

/**
 * Resumes a session by id after a crash or a restart: an isolated session finds its view as it
 * was left, and anything interrupted is finished first. The same as `openSession` with `session`.
 */
export function attachSession(
  workspace: string,
  id: string,
  options: Omit<OpenSessionOptions, 'workspace' | 'session'> = {},
): Promise<Session> {
  return Session.open({ ...options, workspace, session: id });
}

/**
 * Starts an isolated session on a workspace that has a store: the session works on a private
 * view of the workspace (a copy under `.rewind/views/`, with reflinks where the filesystem has
 * them) and the host directory changes only through {@link Session.commit}. Files, commands,
 * checkpoints, rollback and undo all act on the view. Resume it later with
 * `openSession({ workspace, session: id })`. Its id comes from `generateId` when given.
 */
export function startIsolatedSession(options: IsolatedSessionOptions): Promise<Session> {
  return Session.startIsolated(options);
}

/**
 * Runs `work` in an isolated session and ends it (see {@link Session.end}): a clean return
 * auto-commits when asked; a throw commits nothing, and in agent mode keeps the session. The
 * error `work` threw is rethrown after. The session is not made the workspace's current one
 * (unless `makeCurrent: true`): the current session is, during the work and after it, whatever
 * it was before, so a person's commands never land in the hidden view.
 */
export async function withIsolatedSession<T>(
  options: IsolatedSessionOptions & Omit<EndOptions, 'error'>,
  work: (session: Session) => Promise<T>,
): Promise<{ value: T; end: EndResult }> {
  const session = await startIsolatedSession({
    ...options,
    makeCurrent: options.makeCurrent ?? false,
  });
  let value: T;
  try {
    value = await work(session);
  } catch (error) {
    await session.end({ ...options, error });
    throw error;
  }
  return { value, end: await session.end(options) };
}
