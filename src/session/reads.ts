import { isUtf8 } from 'node:buffer';
import { closeSync, constants, fstatSync, readFileSync } from 'node:fs';
import { isSystemError, RewindError } from '../errors.js';
import {
  type Digest,
  kindOf,
  listNames,
  normalizeWorkspacePath,
  WorkspaceDirectories,
} from '../lib/index.js';
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

/** Directories no read reaches, at any depth: what snapshots, the sandbox and `write` leave out. */
const UNREADABLE = new Set(['.rewind', '.git']);

/**
 * Refuses a path at or under `.rewind` (the store: drafts keep request headers verbatim there)
 * or `.git`, however it is spelled, with the code `write` uses for them (`PATH_IGNORED`).
 */
function refuseUnreadable(path: string): void {
  const normalized = normalizeWorkspacePath(path);
  const inside = normalized.split('/').find((segment) => UNREADABLE.has(segment));
  if (inside === undefined) return;
  throw new RewindError(
    'PATH_IGNORED',
    `${normalized} is in ${inside}/ (${inside === '.rewind' ? "Rewind's store" : "git's repository"}), which Rewind leaves out of snapshots and never reads or lists for an agent. Read the files of the workspace instead.`,
    { data: { path: normalized } },
  );
}

/**
 * A text file of the session's workspace; see `Session.read`. Throws `PATH_NOT_FOUND`, and
 * `PATH_CONFLICT` for what is not a file (a directory: list it; a named pipe, which a read would
 * wait on forever).
 */
export async function readText(context: SessionContext, path: string): Promise<string> {
  refuseUnreadable(path);
  const relative = normalizeWorkspacePath(path);
  // Opened through its checked parent, never through a link: a directory swapped for a link
  // meanwhile cannot make it read a file outside the workspace. O_NONBLOCK: a named pipe is
  // opened without waiting for a writer, then refused.
  const directories = new WorkspaceDirectories(context.workspace);
  let descriptor: number;
  try {
    descriptor = directories.openNoFollow(relative, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) {
      throw pathNotFoundError(relative);
    }
    throw directories.explain(error);
  } finally {
    directories.close();
  }
  let kind: string;
  try {
    const stats = fstatSync(descriptor);
    if (stats.isFile()) return readFileSync(descriptor, 'utf8');
    kind = kindOf(stats);
  } finally {
    closeSync(descriptor);
  }
  throw new RewindError(
    'PATH_CONFLICT',
    `${relative} is ${kind}, not a file, so there is no text to read.${kind === 'a directory' ? ' List it instead.' : ''}`,
    { data: { path: relative, kind } },
  );
}

/** The entries of a directory of the session's workspace; see `Session.list`. */
export async function listDirectory(context: SessionContext, path: string): Promise<string[]> {
  const isRoot = path === '.' || path === '';
  if (!isRoot) refuseUnreadable(path);
  let entries: { name: string; isDirectory: boolean }[];
  if (isRoot) {
    entries = listNames(context.workspace);
  } else {
    const relative = normalizeWorkspacePath(path);
    const directories = new WorkspaceDirectories(context.workspace);
    try {
      entries = directories.list(relative);
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) throw pathNotFoundError(relative);
      if (isSystemError(error, 'ENOTDIR')) {
        throw new RewindError(
          'PATH_CONFLICT',
          `${relative} is not a directory, so it has no entries to list. Read it instead.`,
          { data: { path: relative } },
        );
      }
      throw directories.explain(error);
    } finally {
      directories.close();
    }
  }
  return entries
    .filter((entry) => entry.name !== '.rewind')
    .map((entry) => `${entry.name}${entry.isDirectory ? '/' : ''}`)
    .sort();
}

/**
 * A stored output: its text (as stored: redacted when the session redacts) and whether it was cut.
 * Bytes that are not UTF-8 (an image, a gzip body) are in `base64` too, exactly: `text` shows
 * each of them as U+FFFD.
 */
export interface StoredText {
  text: string;
  sizeBytes: number;
  truncated: boolean;
  base64?: string;
}

/** What an action stored, as `Session.show` returns it. */
export interface ActionDetail extends ActionInfo {
  /** For a command: how it ended and its output. */
  command?: {
    command: unknown;
    exitCode: number | null;
    signal: string | null;
    timedOut: boolean;
    durationMs: number;
    sandbox: string;
    stdout: StoredText;
    stderr: StoredText;
  };
  /** For a request: what was sent and what came back. */
  request?: {
    method: string;
    url: string;
    headers: Record<string, string>;
    body: StoredText | undefined;
  };
  response?: {
    status: number;
    headers: Record<string, string>;
    body: StoredText;
    durationMs: number;
    address: string | undefined;
  };
  /** For any other action: what its entries hold besides the above (target, detail, paths...). */
  started: Record<string, unknown>;
  closed: Record<string, unknown> | undefined;
  /** Where the record was redacted before storing (`stdout`, `request.headers.authorization`). */
  redacted: string[];
}

interface StoredBlob {
  digest: Digest;
  sizeBytes: number;
  truncated?: boolean;
}

async function storedText(
  context: SessionContext,
  blob: StoredBlob | undefined,
): Promise<StoredText | undefined> {
  if (!blob || typeof blob.digest !== 'string') return undefined;
  const bytes = await context.store.get(blob.digest);
  return {
    text: bytes.toString('utf8'),
    sizeBytes: bytes.length,
    truncated: blob.truncated === true,
    ...(!isUtf8(bytes) && { base64: bytes.toString('base64') }),
  };
}

const EMPTY_TEXT: StoredText = { text: '', sizeBytes: 0, truncated: false };

/** What an action stored: a command's output, a request and its response; see `Session.show`. */
export async function showAction(context: SessionContext, id: number): Promise<ActionDetail> {
  const action = (await readJournal(context)).findAction(id);
  const started = action.started.body;
  const closed = action.closed?.body;
  const evidence = (closed?.evidence ?? {}) as Record<string, unknown>;
  const detail: ActionDetail = {
    id: action.id,
    kind: action.kind,
    class: action.class,
    state: action.state,
    target: action.target,
    at: action.at,
    undoes: action.undoes,
    started,
    closed,
    redacted: [
      ...((started.redacted as string[] | undefined) ?? []),
      ...((closed?.redacted as string[] | undefined) ?? []),
    ],
  };
  if (action.kind === 'exec' && closed && 'exitCode' in evidence) {
    detail.command = {
      command: started.command,
      exitCode: evidence.exitCode as number | null,
      signal: evidence.signal as string | null,
      timedOut: evidence.timedOut === true,
      durationMs: Number(evidence.durationMs),
      sandbox: String(evidence.sandbox),
      stdout: (await storedText(context, evidence.stdout as StoredBlob)) ?? EMPTY_TEXT,
      stderr: (await storedText(context, evidence.stderr as StoredBlob)) ?? EMPTY_TEXT,
    };
  }
  if (action.kind === 'http') {
    const request = (started.request ?? {}) as Record<string, unknown>;
    detail.request = {
      method: String(request.method),
      url: String(request.url),
      headers: (request.headers ?? {}) as Record<string, string>,
      body: await storedText(context, evidence.requestBody as StoredBlob | undefined),
    };
    if (typeof evidence.status === 'number') {
      detail.response = {
        status: evidence.status,
        headers: (evidence.headers ?? {}) as Record<string, string>,
        body: (await storedText(context, evidence.body as StoredBlob)) ?? EMPTY_TEXT,
        durationMs: Number(evidence.durationMs),
        address: typeof evidence.address === 'string' ? evidence.address : undefined,
      };
    }
  }
  return detail;
}
