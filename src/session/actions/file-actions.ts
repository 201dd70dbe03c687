import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { isSystemError, RewindError } from '../../errors.js';
import { namedAndMore, normalizeWorkspacePath, resolveWorkspacePath } from '../../lib/index.js';
import { encodeTree, type ObjectBatch, type TreeEntry } from '../../store/index.js';
import { isIgnoredPath, snapshotPath } from '../../workspace/index.js';
import { outsideRulesOf, type SessionContext } from '../context.js';
import { type PathChange, referencesOf } from '../journal/action-records.js';
import { withWorkspaceLock } from '../journal/journal.js';
import { applyAnnounced, changesOf } from '../journal/recovery.js';
import type { ActionResult } from './journaled-spec.js';

/** The error for a path that holds nothing. */
export function pathNotFoundError(path: string): RewindError {
  return new RewindError('PATH_NOT_FOUND', `Nothing is at ${path} in the workspace.`, {
    data: { path },
  });
}

/**
 * Resolves an action's path: inside the workspace, through no symbolic link, not left out of
 * snapshots. Throws `PATH_INVALID`, `SYMLINK_REFUSED`, `PATH_IGNORED`.
 */
export async function resolveActionPath(
  context: SessionContext,
  path: string,
  isDirectory: boolean,
): Promise<string> {
  const relative = normalizeWorkspacePath(path);
  await resolveWorkspacePath(context.workspace, relative);
  if (isIgnoredPath(context.workspace, relative, isDirectory, outsideRulesOf(context))) {
    throw new RewindError(
      'PATH_IGNORED',
      `${relative} is left out of snapshots (by .gitignore or .rewindignore, or it is in .git or .rewind), so Rewind could not undo an action on it. ` +
        'Act on it without Rewind, or re-include it with a "!" line in .rewindignore.',
      { data: { path: relative } },
    );
  }
  return relative;
}

/** The current state of a path, stored; refuses one that holds what snapshots leave out. */
async function storePreImage(
  context: SessionContext,
  relative: string,
  batch: ObjectBatch,
): Promise<TreeEntry | undefined> {
  const { entry, ignored, special } = await snapshotPath(
    context.workspace,
    relative,
    batch,
    outsideRulesOf(context),
  );
  if (ignored.length > 0) {
    throw new RewindError(
      'PATH_IGNORED',
      `${relative} holds ${namedAndMore(ignored)}, ` +
        'which snapshots leave out (.gitignore, .rewindignore, .git, .rewind): Rewind could not bring them back. Move them out first, or act without Rewind.',
      { data: { path: relative, ignored: ignored.slice(0, 50) } },
    );
  }
  if (special.length > 0) {
    throw new RewindError(
      'PATH_CONFLICT',
      `${relative} holds ${namedAndMore(special)}, ` +
        'which are not files, directories or links (a FIFO, a socket, a device): Rewind cannot keep a copy, so could not bring them back. Move them out first, or act without Rewind.',
      { data: { path: relative, special: special.slice(0, 50) } },
    );
  }
  return entry;
}

/**
 * The change that puts `entry` at `relative`, creating missing parent directories: the path
 * changed is the topmost directory created, or `relative` itself when its parent exists.
 */
async function placeEntry(
  context: SessionContext,
  relative: string,
  entry: TreeEntry,
  batch: ObjectBatch,
): Promise<{ path: string; before: undefined; after: TreeEntry }> {
  const parts = relative.split('/');
  let missing = parts.length - 1;
  for (let index = 0; index < parts.length - 1; index++) {
    const prefix = parts.slice(0, index + 1).join('/');
    const stats = await lstat(join(context.workspace, prefix)).catch((error: unknown) => {
      if (isSystemError(error, 'ENOENT')) return undefined;
      throw error;
    });
    if (stats === undefined) {
      missing = index;
      break;
    }
    if (!stats.isDirectory()) {
      throw new RewindError(
        'PATH_CONFLICT',
        `Cannot create ${relative}: ${prefix} is a file, not a directory.`,
        { data: { path: relative, conflict: prefix } },
      );
    }
  }
  let after: TreeEntry = { ...entry, name: parts.at(-1) as string };
  for (let index = parts.length - 2; index >= missing; index--) {
    const { digest } = await batch.put(encodeTree([after]));
    after = { name: parts[index] as string, type: 'directory', mode: 0o755, digest };
  }
  return { path: parts.slice(0, missing + 1).join('/'), before: undefined, after };
}

/**
 * Journals and performs one file action: `compute` takes the pre-image of every path the action
 * changes and stores the post-image, so the intent names both before anything moves; a process
 * killed midway is finished by the next open.
 */
async function journalFileAction(
  context: SessionContext,
  kind: string,
  target: string,
  compute: (batch: ObjectBatch) => Promise<PathChange[]>,
): Promise<ActionResult> {
  return withWorkspaceLock(context, `${kind} ${target}`, async (journal) => {
    const batch = context.store.batch();
    let paths: PathChange[];
    try {
      paths = await compute(batch);
    } finally {
      await batch.commit();
    }
    const started = await journal.append(
      'action-started',
      { action: kind, class: 'reversible', target, paths },
      referencesOf(paths),
    );
    const changes = await changesOf(context, { type: 'paths', paths });
    await applyAnnounced(context, journal, started, changes, { isRecovery: false });
    return {
      id: started.seq,
      kind,
      class: 'reversible',
      state: 'done',
      target,
      changes: paths,
      warnings: [],
    };
  });
}

/** Writes a file as a reversible action; see `Session.write`. */
export async function writePath(
  context: SessionContext,
  path: string,
  content: string | Uint8Array,
  mode: number | undefined,
): Promise<ActionResult> {
  const relative = await resolveActionPath(context, path, false);
  return journalFileAction(context, 'write', relative, async (batch) => {
    const before = await storePreImage(context, relative, batch);
    if (before?.type === 'directory') {
      throw new RewindError(
        'PATH_CONFLICT',
        `Cannot write ${relative}: it is a directory. Delete it first, or write a path inside it.`,
        { data: { path: relative } },
      );
    }
    const bytes = typeof content === 'string' ? Buffer.from(content) : content;
    const { digest, sizeBytes } = await batch.put(bytes);
    const file: TreeEntry = {
      name: '',
      type: 'file',
      mode: mode ?? (before?.type === 'file' ? before.mode : 0o644),
      sizeBytes,
      digest,
    };
    if (before) return [{ path: relative, before, after: { ...file, name: before.name } }];
    return [await placeEntry(context, relative, file, batch)];
  });
}

/** Deletes a file, link or directory tree as a reversible action; see `Session.delete`. */
export async function deletePath(context: SessionContext, path: string): Promise<ActionResult> {
  const relative = await resolveActionPath(context, path, true);
  return journalFileAction(context, 'delete', relative, async (batch) => {
    const before = await storePreImage(context, relative, batch);
    if (!before) throw pathNotFoundError(relative);
    return [{ path: relative, before, after: undefined }];
  });
}

/** Moves a file, link or directory tree as a reversible action; see `Session.move`. */
export async function movePath(
  context: SessionContext,
  from: string,
  to: string,
): Promise<ActionResult> {
  const source = await resolveActionPath(context, from, true);
  const destination = await resolveActionPath(context, to, true);
  if (destination === source || destination.startsWith(`${source}/`)) {
    throw new RewindError(
      'PATH_CONFLICT',
      `Cannot move ${source} to ${destination}: that is the same path or inside it.`,
      { data: { path: source, to: destination } },
    );
  }
  return journalFileAction(context, 'move', `${source} -> ${destination}`, async (batch) => {
    const moved = await storePreImage(context, source, batch);
    if (!moved) throw pathNotFoundError(source);
    const replaced = await storePreImage(context, destination, batch);
    if (replaced && (replaced.type !== 'file' || moved.type !== 'file')) {
      throw new RewindError(
        'PATH_CONFLICT',
        `Cannot move ${source} to ${destination}: a ${replaced.type} is there. Delete it first, or choose a free path.`,
        { data: { path: destination } },
      );
    }
    const gone: PathChange = { path: source, before: moved, after: undefined };
    if (replaced) {
      return [
        gone,
        { path: destination, before: replaced, after: { ...moved, name: replaced.name } },
      ];
    }
    return [gone, await placeEntry(context, destination, moved, batch)];
  });
}

/** Creates a directory and its missing parents as a reversible action; see `Session.mkdir`. */
export async function makeDirectory(context: SessionContext, path: string): Promise<ActionResult> {
  const relative = await resolveActionPath(context, path, true);
  return journalFileAction(context, 'mkdir', relative, async (batch) => {
    const existing = await storePreImage(context, relative, batch);
    if (existing) {
      throw new RewindError(
        'PATH_CONFLICT',
        `Cannot create the directory ${relative}: a ${existing.type} is there already.`,
        { data: { path: relative } },
      );
    }
    const { digest } = await batch.put(encodeTree([]));
    const directory: TreeEntry = { name: '', type: 'directory', mode: 0o755, digest };
    return [await placeEntry(context, relative, directory, batch)];
  });
}
