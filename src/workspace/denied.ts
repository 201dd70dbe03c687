// A restore refused by the system's permissions: said of the path a person knows (never the
// temporary file written beside it), with what to do about it.
import { lstatSync } from 'node:fs';
import { posix } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { diskPath } from '../lib/index.js';

/** What a restore was doing at a path when the system refused it. */
export type RestoreStep = 'write' | 'create' | 'remove' | 'set the mode of';

/**
 * `error`, unless it is a refused permission (EACCES, EPERM) met while doing `step` at `relative`
 * (a path of the workspace at `root`): then an `IO_FAILED` error that names that path, the folder
 * whose permissions stand in the way (the one holding it; the path itself for its mode), who owns
 * it, and what to do. `data`: `path`, `folder`, `errno`.
 */
export function explainDenied(
  root: string,
  relative: string,
  step: RestoreStep,
  error: unknown,
): unknown {
  if (!isSystemError(error, 'EACCES') && !isSystemError(error, 'EPERM')) return error;
  // Writing, creating or removing a name is the folder's to allow; setting a mode, its owner's.
  const folder = step === 'set the mode of' ? relative : posix.dirname(relative);
  const shown = folder === '.' || folder === '' ? 'the workspace folder' : folder;
  let owner = '';
  const uid = process.getuid?.();
  try {
    const stats = lstatSync(diskPath(folder === '.' ? root : `${root}/${folder}`));
    if (uid !== undefined && stats.uid !== uid) {
      owner = ` (it belongs to user ${stats.uid}, and this runs as user ${uid})`;
    }
  } catch {}
  const remedy =
    step === 'set the mode of'
      ? `Run this as its owner, or have ${shown} given to this user (chown), then retry.`
      : owner === ''
        ? `Give yourself write permission on ${shown} (chmod u+w), then retry.`
        : `Have its owner give this user write permission on it (or chown it to this user), or run this as its owner, then retry.`;
  return new RewindError(
    'IO_FAILED',
    step === 'set the mode of'
      ? `Permission denied: could not set the mode of ${relative}: only its owner may${owner}. ${remedy}`
      : `Permission denied: could not ${step} ${relative}: this user may not write in ${shown}${owner}. ${remedy}`,
    { data: { path: relative, folder: shown, errno: error.code }, cause: error },
  );
}
