import type { Dirent } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { isSystemError } from '../errors.js';
import { normalizeWorkspacePath, resolveWorkspacePath } from '../lib/index.js';
import { pathNotFoundError } from './actions/file-actions.js';
import type { SessionContext } from './context.js';
import type { ActionClass, ActionState } from './journal/action-records.js';
import { readJournal } from './journal/journal.js';

/** An action as `Session.actions` lists it. */
export interface ActionInfo {
  id: number;
  kind: string;
  class: ActionClass;
  state: ActionState;
  target: string;
  at: string;
  undoes: number | undefined;
}

/** Every action of the session, oldest first, with its class and derived state. */
export async function listActions(context: SessionContext): Promise<ActionInfo[]> {
  return [...(await readJournal(context)).actions().values()].map((action) => ({
    id: action.id,
    kind: action.kind,
    class: action.class,
    state: action.state,
    target: action.target,
    at: action.at,
    undoes: action.undoes,
  }));
}

/** A text file of the session's workspace; see `Session.read`. */
export async function readText(context: SessionContext, path: string): Promise<string> {
  const absolute = await resolveWorkspacePath(context.workspace, path);
  try {
    return await readFile(absolute, 'utf8');
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) throw pathNotFoundError(normalizeWorkspacePath(path));
    throw error;
  }
}

/** The entries of a directory of the session's workspace; see `Session.list`. */
export async function listDirectory(context: SessionContext, path: string): Promise<string[]> {
  const absolute =
    path === '.' || path === ''
      ? context.workspace
      : await resolveWorkspacePath(context.workspace, path);
  let entries: Dirent[];
  try {
    entries = await readdir(absolute, { withFileTypes: true });
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) throw pathNotFoundError(normalizeWorkspacePath(path));
    throw error;
  }
  return entries
    .filter((entry) => entry.name !== '.rewind')
    .map((entry) => `${entry.name}${entry.isDirectory() ? '/' : ''}`)
    .sort();
}
