/**
 * Every failure Rewind reports has one of these codes. The code is stable and meant for programs;
 * the message is meant for people and says what happened and what to do next.
 */
export const ERROR_CODES = [
  /** A caller passed a value Rewind cannot use (bad label, bad option). `data` names it. */
  'INVALID_ARGUMENT',
  /** No `.rewind/` store was found where one was expected. */
  'STORE_NOT_FOUND',
  /** A `.rewind/` directory exists but was not made by Rewind. */
  'STORE_NOT_OURS',
  /** The store was written by a newer Rewind whose format this version cannot read. */
  'STORE_VERSION_UNSUPPORTED',
  /** An object is missing from the store. `data.digest`. */
  'OBJECT_NOT_FOUND',
  /** An object's bytes no longer hash to its name. `data.digest`, `data.file`. */
  'OBJECT_CORRUPT',
  /** A tree object does not follow the tree encoding of SPEC.md. `data.digest`. */
  'TREE_INVALID',
  /** No session matches the given id. `data.session`. */
  'SESSION_NOT_FOUND',
  /** More than one session matches the given id prefix. `data.matches`. */
  'SESSION_AMBIGUOUS',
  /**
   * Two copies of one session (a local ledger and a shared one) hold different entries at the
   * same seq, so neither can take the other's: `rewind push` / `pull` refuse. `data.seq`.
   */
  'SESSION_DIVERGED',
  /** A ledger line is not a valid entry, or entries are out of order. `data.file`, `data.line`. */
  'LEDGER_CORRUPT',
  /** A ledger entry has a format version newer than this Rewind. `data.version`. */
  'LEDGER_VERSION_UNSUPPORTED',
  /** A ledger entry has a kind this Rewind does not know (written by a newer version). */
  'ENTRY_KIND_UNKNOWN',
  /** A lock is held by a live process and was not released in time. `data.holder`. */
  'LOCK_HELD',
  /** A workspace path is absolute, escapes the workspace, or holds a NUL byte. `data.path`. */
  'PATH_INVALID',
  /** A workspace path goes through a symbolic link. `data.path`, `data.link`. */
  'SYMLINK_REFUSED',
  /** The workspace is not a directory Rewind can work in (missing, a file). `data.path`. */
  'WORKSPACE_INVALID',
  /** The workspace is too broad to snapshot (`/`, a home directory). `data.path`. */
  'WORKSPACE_REFUSED',
  /** A file or directory inside the workspace cannot be read. `data.path`. */
  'PATH_UNREADABLE',
  /** A checkpoint label is taken already. `data.label`. */
  'CHECKPOINT_EXISTS',
  /** No checkpoint has this label. `data.label`. */
  'CHECKPOINT_NOT_FOUND',
  /** No action has this id, or it cannot be undone. `data.id`. */
  'ACTION_NOT_FOUND',
  /** The operating system refused a file operation. `cause` holds the system error. */
  'IO_FAILED',
  /** The action exists but its class or state does not allow this (undo of an irreversible one,
   * approval of a discarded draft). `data.id`, `data.state`. */
  'ACTION_NOT_ALLOWED',
  /** A path is left out of snapshots by `.rewindignore` (or is `.git`/`.rewind`), so an action
   * on it could not be undone. `data.path`. */
  'PATH_IGNORED',
  /** A path holds something an action cannot work on (a directory where a file is written, a
   * destination that exists). `data.path`. */
  'PATH_CONFLICT',
  /** Nothing is at a path an action needs (the file to delete or move). `data.path`. */
  'PATH_NOT_FOUND',
  /**
   * A first snapshot would store more than the budget asked for. `data` has the preview: files,
   * bytes, the largest directories, what the rules leave out.
   */
  'SNAPSHOT_TOO_LARGE',
  /** A request target is an address with no legitimate use, or a private one the session
   * blocks. Nothing was sent. `data.host`, `data.address`, `data.reason`. */
  'ADDRESS_REFUSED',
  /** An HTTP exchange failed or timed out after it was sent. `data.url`. */
  'HTTP_FAILED',
  /** A message list is in none of the formats Rewind knows. `data.index`: the first misfit. */
  'CONVERSATION_FORMAT_UNKNOWN',
  /** A message list is not in the format it was said to be in. `data.index`, `data.format`. */
  'CONVERSATION_FORMAT_MISMATCH',
  /** A session or checkpoint has no conversation recorded. `data.label`. */
  'CONVERSATION_NOT_FOUND',
  /** The sandbox cannot start here (bubblewrap missing, user namespaces disabled). `data.reason`. */
  'SANDBOX_UNAVAILABLE',
  /** An isolated session still holds changes not committed to the host. `data.paths`. */
  'UNCOMMITTED_CHANGES',
  /** The verifier failed (after any automatic rollback). `data.verificationSeq`. */
  'VERIFICATION_FAILED',
  /** The verifier gave no verdict and the escalation said continue or rollback. */
  'VERIFICATION_UNKNOWN',
  /** The escalation said stop: see HaltError. `data.checkpoint`. */
  'HALTED',
  /** A command run by `session.run` failed (non-zero exit, signal, timeout). `data.id`. */
  'COMMAND_FAILED',
  /** A command could not be started (missing program or directory). `data.program`. */
  'EXEC_FAILED',
] as const;

/** A stable, machine-readable error code; see {@link ERROR_CODES}. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * The one error class Rewind throws. `code` is stable, `data` holds the values involved, and
 * `message` says what happened and what to do next.
 */
export class RewindError extends Error {
  override readonly name = 'RewindError';
  readonly code: ErrorCode;
  readonly data: Readonly<Record<string, unknown>>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { data?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.data = options.data ?? {};
  }
}

/** True when `error` is a {@link RewindError}, optionally with the given code. */
export function isRewindError(error: unknown, code?: ErrorCode): error is RewindError {
  return error instanceof RewindError && (code === undefined || error.code === code);
}

/** True when `error` is a Node.js system error with the given `code` (for example `ENOENT`). */
export function isSystemError(error: unknown, code: string): error is NodeJS.ErrnoException {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === code;
}

/** What a system error code means for people, and what to do about it. */
const SYSTEM_FAILURES: Readonly<Record<string, string>> = {
  ENOSPC: 'The disk is full',
  EDQUOT: 'The disk quota is used up',
  EIO: 'The disk reported an input/output error (it or its filesystem may be failing: check it)',
  EROFS: 'The filesystem is read-only',
  EACCES: 'Permission was denied (check the path and its permissions)',
  EPERM: 'The operation was not permitted (check the path and its permissions)',
  ENOMEM: 'The system ran out of memory',
  EMFILE: 'Too many files are open in this process',
  ENFILE: 'Too many files are open on the system',
};

/**
 * Any error as a {@link RewindError}: itself if it is one; a system error (a full disk, an I/O
 * error, a refused permission) as `IO_FAILED`, saying what it means and to retry once it is
 * dealt with (the next command finishes or closes whatever was cut short); anything else
 * undefined. For the edges, which show every failure with a code.
 */
export function asRewindError(error: unknown): RewindError | undefined {
  if (isRewindError(error)) return error;
  if (!(error instanceof Error)) return undefined;
  const system = error as NodeJS.ErrnoException;
  if (typeof system.code !== 'string' || !/^E[A-Z0-9]+$/.test(system.code)) return undefined;
  const meaning = SYSTEM_FAILURES[system.code] ?? 'The system refused a file operation';
  return new RewindError(
    'IO_FAILED',
    `${meaning}: ${system.message}. Deal with that, then retry: the next command finishes or closes anything left half-done.`,
    {
      data: { errno: system.code, ...(system.path && { path: system.path }) },
      cause: error,
    },
  );
}
