import type { Dirent } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { isSystemError, RewindError } from '../errors.js';
import {
  type Digest,
  normalizeWorkspacePath,
  readPlainFile,
  resolveWorkspacePath,
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

/**
 * A text file of the session's workspace; see `Session.read`. Throws `PATH_NOT_FOUND`, and
 * `PATH_CONFLICT` for what is not a file (a directory: list it; a named pipe, which a read would
 * wait on forever).
 */
export async function readText(context: SessionContext, path: string): Promise<string> {
  const absolute = await resolveWorkspacePath(context.workspace, path);
  let read: Awaited<ReturnType<typeof readPlainFile>>;
  try {
    read = await readPlainFile(absolute);
  } catch (error) {
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR'))
      throw pathNotFoundError(normalizeWorkspacePath(path));
    throw error;
  }
  if (read.isFile) return read.value.toString('utf8');
  const normalized = normalizeWorkspacePath(path);
  throw new RewindError(
    'PATH_CONFLICT',
    `${normalized} is ${read.kind}, not a file, so there is no text to read.${read.kind === 'a directory' ? ' List it instead.' : ''}`,
    { data: { path: normalized, kind: read.kind } },
  );
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
    if (isSystemError(error, 'ENOTDIR')) {
      const normalized = normalizeWorkspacePath(path);
      throw new RewindError(
        'PATH_CONFLICT',
        `${normalized} is not a directory, so it has no entries to list. Read it instead.`,
        { data: { path: normalized } },
      );
    }
    throw error;
  }
  return entries
    .filter((entry) => entry.name !== '.rewind')
    .map((entry) => `${entry.name}${entry.isDirectory() ? '/' : ''}`)
    .sort();
}

/** A stored output: its text (as stored: redacted when the session redacts) and whether it was cut. */
export interface StoredText {
  text: string;
  sizeBytes: number;
  truncated: boolean;
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
