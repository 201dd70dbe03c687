import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  lstatSync,
  openSync,
  readlinkSync,
} from 'node:fs';
import { lstat } from 'node:fs/promises';
import { isAbsolute, join, posix } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { diskPath, listNames, nameBytes } from './names.js';
import { jsonPreview } from './text.js';

/** The longest file name the system takes, in bytes (NAME_MAX on Linux and macOS). */
const NAME_MAX_BYTES = 255;

/** The longest path the system takes, in bytes, its terminating NUL left out (PATH_MAX - 1). */
const PATH_MAX_BYTES = 4095;

/**
 * Normalizes a workspace-relative path to its canonical form (`a/b/c`, forward slashes, no `.`
 * segments). Throws `PATH_INVALID` for an empty path, an absolute path, a NUL byte, text that is
 * not valid Unicode (a lone surrogate other than a byte escape, see names.ts), a name longer than
 * the system takes (255 bytes), or a path that climbs out of the workspace with `..`.
 */
export function normalizeWorkspacePath(path: string): string {
  const fail = (why: string): never => {
    throw new RewindError(
      'PATH_INVALID',
      `The path ${jsonPreview(path, 200)} ${why}. Give a path relative to the workspace root, such as "src/index.ts".`,
      { data: { path } },
    );
  };
  if (path.includes('\0')) fail('contains a NUL byte');
  // A lone surrogate has no UTF-8: the system would get U+FFFD, another name than the one
  // journaled. U+DC80..U+DCFF alone stands for a byte of a name that is not UTF-8 (names.ts), so
  // only the others are refused. In a `u` pattern a pair is one code point: the class matches only
  // a surrogate alone.
  if (/[\uD800-\uDC7F\uDD00-\uDFFF]/u.test(path)) {
    fail('is not valid Unicode (it holds a lone surrogate)');
  }
  if (path.trim() === '') fail('is empty');
  if (isAbsolute(path) || posix.isAbsolute(path)) fail('is absolute');
  const normalized = posix.normalize(path).replace(/\/+$/, '');
  if (normalized === '..' || normalized.startsWith('../')) fail('leads out of the workspace');
  if (normalized === '.' || normalized === '') fail('names the workspace root itself');
  // A byte that is not UTF-8 takes 3 bytes as text but 1 on the disk: count only long names.
  const long = normalized
    .split('/')
    .find(
      (name) => Buffer.byteLength(name) > NAME_MAX_BYTES && nameBytes(name).length > NAME_MAX_BYTES,
    );
  if (long !== undefined) {
    fail(
      `holds a name of ${nameBytes(long).length} bytes, longer than the ${NAME_MAX_BYTES} the system takes`,
    );
  }
  return normalized;
}

/**
 * Resolves a workspace-relative path to an absolute path inside `root`, refusing to go through a
 * symbolic link at any component, the last one included, before anything follows it. Components
 * that do not exist yet are fine (the path may be about to be created). `root` must be an
 * absolute, already-resolved directory.
 *
 * Throws `PATH_INVALID` as {@link normalizeWorkspacePath} does, and for a path longer than the
 * system takes (4,095 bytes with the workspace's own), and `SYMLINK_REFUSED` naming the first
 * component that is a link.
 */
export async function resolveWorkspacePath(root: string, path: string): Promise<string> {
  const normalized = normalizeWorkspacePath(path);
  const absolute = join(root, normalized);
  if (Buffer.byteLength(absolute) > PATH_MAX_BYTES && nameBytes(absolute).length > PATH_MAX_BYTES) {
    throw new RewindError(
      'PATH_INVALID',
      `The path ${jsonPreview(normalized, 80)} is ${nameBytes(absolute).length} bytes long with the workspace's own, longer than the ${PATH_MAX_BYTES} the system takes. Give a shorter path.`,
      { data: { path: normalized } },
    );
  }
  let current = root;
  for (const segment of normalized.split('/')) {
    current = join(current, segment);
    let stats: Awaited<ReturnType<typeof lstat>>;
    try {
      stats = await lstat(diskPath(current));
    } catch (error) {
      if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) break;
      throw error;
    }
    if (stats.isSymbolicLink()) throw symlinkRefused(normalized, current.slice(root.length + 1));
  }
  return absolute;
}

/** Where a process sees its own open file descriptors as paths (Linux). */
const DESCRIPTOR_PATHS = '/proc/self/fd';
let canUseDescriptorPaths: boolean | undefined;

function usesDescriptorPaths(): boolean {
  canUseDescriptorPaths ??= process.platform === 'linux' && existsSync(DESCRIPTOR_PATHS);
  return canUseDescriptorPaths;
}

function symlinkRefused(path: string, link: string): RewindError {
  return new RewindError(
    'SYMLINK_REFUSED',
    `The path "${path}" goes through the symbolic link "${link}", which Rewind never follows. ` +
      'Use the path of the real file instead.',
    { data: { path, link } },
  );
}

/** Opens a name for path operations only (Linux's O_PATH, which Node does not export). */
const O_PATH = 0o10000000;

/** How many directories {@link WorkspaceDirectories} keeps open before it closes them all. */
const MAX_OPEN_DIRECTORIES = 128;

/**
 * Paths inside a workspace that cannot be redirected out of it, even by a process changing the
 * workspace at the same time. Each directory is opened one component at a time, relative to the
 * one above it, never following a symbolic link (O_PATH | O_NOFOLLOW | O_DIRECTORY, as openat
 * would; O_PATH needs only the right to pass through it), and kept open; {@link locate} then
 * names a path through its open parent (`/proc/self/fd/N/name`), so swapping a directory for a
 * link after the check changes nothing: the kernel resolves the name in the directory that was
 * checked. Elsewhere than Linux, each component is checked with lstat instead (which a
 * concurrent writer could race).
 *
 * The caller must {@link forget} a directory it removes or replaces, and {@link close} at the end.
 */
export class WorkspaceDirectories {
  private readonly open = new Map<string, number>();

  constructor(private readonly root: string) {
    usesDescriptorPaths();
  }

  /**
   * A path naming `relative` (a normalized workspace path) through its opened parent. Throws
   * `SYMLINK_REFUSED` when a parent component is a symbolic link. When a parent is missing (or
   * is a file), the path names the missing part under the deepest directory that exists, so
   * whatever is done with it fails with ENOENT or ENOTDIR.
   */
  locate(relative: string): string {
    const slash = relative.lastIndexOf('/');
    const parent = slash === -1 ? '' : relative.slice(0, slash);
    const name = relative.slice(slash + 1);
    if (!canUseDescriptorPaths) {
      this.checkWithLstat(relative, parent);
      return `${this.root}/${relative}`;
    }
    const { descriptor, rest } = this.openDirectory(parent);
    return `${DESCRIPTOR_PATHS}/${descriptor}/${rest === '' ? name : `${rest}/${name}`}`;
  }

  /**
   * Like {@link locate}, for a path about to be created or replaced: its parent must exist and be
   * a directory, else this throws the ENOENT or ENOTDIR that opening it gave. A missing component
   * is never left in the path, since another process could make it a link to elsewhere before
   * the path is used.
   */
  locateToCreate(relative: string): string {
    const slash = relative.lastIndexOf('/');
    const parent = slash === -1 ? '' : relative.slice(0, slash);
    if (canUseDescriptorPaths) {
      const { missing } = this.openDirectory(parent);
      if (missing) throw missing;
    }
    return this.locate(relative);
  }

  /**
   * Sets the mode of the directory `relative` without following a link there: it is opened
   * with O_PATH (which needs no permission on it, so a mode of 000 can be set and lifted) and
   * its mode set through the descriptor. Throws ENOTDIR when it is not a directory.
   */
  chmodDirectory(relative: string, mode: number): void {
    const at = this.locate(relative);
    if (!canUseDescriptorPaths) {
      if (isSymbolicLink(at)) throw symlinkRefused(relative, relative);
      chmodSync(diskPath(at), mode);
      return;
    }
    const descriptor = openSync(
      diskPath(at),
      O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW,
    );
    try {
      chmodSync(`${DESCRIPTOR_PATHS}/${descriptor}`, mode);
    } finally {
      closeSync(descriptor);
    }
  }

  /**
   * Opens `relative` itself without following a link at any component, the last one included
   * (`SYMLINK_REFUSED`), with `flags` (O_NOFOLLOW is added); the caller closes the descriptor.
   */
  openNoFollow(relative: string, flags: number): number {
    const at = this.locate(relative);
    try {
      return openSync(diskPath(at), flags | constants.O_NOFOLLOW);
    } catch (error) {
      if (
        (isSystemError(error, 'ELOOP') || isSystemError(error, 'ENOTDIR')) &&
        isSymbolicLink(at)
      ) {
        throw symlinkRefused(relative, relative);
      }
      throw error;
    }
  }

  /**
   * The entries of the directory `relative`, reached without following a link (see
   * {@link openNoFollow}): each name exactly as on disk (see names.ts), and whether it is a
   * directory.
   */
  list(relative: string): { name: string; isDirectory: boolean }[] {
    const descriptor = this.openNoFollow(relative, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      // Where /proc is missing, the checked path is listed (see the class).
      return listNames(
        canUseDescriptorPaths
          ? `${DESCRIPTOR_PATHS}/${descriptor}`
          : diskPath(this.locate(relative)),
      );
    } finally {
      closeSync(descriptor);
    }
  }

  /**
   * The error, with the paths it names through an open directory (`/proc/self/fd/N/...`) given
   * as the real paths they stand for, so a message names what a person knows. Call before
   * {@link close}.
   */
  explain(error: unknown): unknown {
    if (!(error instanceof Error) || this.open.size === 0) return error;
    const named = new Map([...this.open].map(([path, descriptor]) => [String(descriptor), path]));
    const real = (text: string): string =>
      text.replace(/\/proc\/self\/fd\/(\d+)/g, (whole, descriptor: string) => {
        const path = named.get(descriptor);
        if (path === undefined) return whole;
        return path === '' ? this.root : `${this.root}/${path}`;
      });
    error.message = real(error.message);
    const withPaths = error as Error & { path?: unknown; dest?: unknown };
    if (typeof withPaths.path === 'string') withPaths.path = real(withPaths.path);
    if (typeof withPaths.dest === 'string') withPaths.dest = real(withPaths.dest);
    return error;
  }

  /** Closes what is open for `relative` and everything under it (removed or replaced). */
  forget(relative: string): void {
    for (const [path, descriptor] of this.open) {
      if (path === relative || path.startsWith(`${relative}/`) || relative === '') {
        closeSync(descriptor);
        this.open.delete(path);
      }
    }
  }

  close(): void {
    this.forget('');
  }

  /**
   * True when the next directory opened closes every one open first (there are
   * MAX_OPEN_DIRECTORIES): a path {@link locate} gave before then may name another directory
   * after it, so work still using one must end first.
   */
  isFull(): boolean {
    return this.open.size >= MAX_OPEN_DIRECTORIES;
  }

  /**
   * The deepest directory of `parent` that exists, opened, the components left below it, and why
   * the first of them could not be opened.
   */
  private openDirectory(parent: string): {
    descriptor: number;
    rest: string;
    missing?: NodeJS.ErrnoException;
  } {
    const known = this.open.get(parent);
    if (known !== undefined) return { descriptor: known, rest: '' };
    if (this.open.size >= MAX_OPEN_DIRECTORIES) this.close();
    const segments = parent === '' ? [] : parent.split('/');
    // Start from the deepest ancestor already open.
    let depth = segments.length;
    let descriptor: number | undefined;
    while (depth > 0 && descriptor === undefined) {
      depth -= 1;
      descriptor = this.open.get(segments.slice(0, depth).join('/'));
    }
    if (descriptor === undefined) {
      descriptor = openSync(diskPath(this.root), O_PATH | constants.O_DIRECTORY);
      this.open.set('', descriptor);
      depth = 0;
    }
    for (; depth < segments.length; depth++) {
      const path = segments.slice(0, depth + 1).join('/');
      const at = `${DESCRIPTOR_PATHS}/${descriptor}/${segments[depth]}`;
      let next: number;
      try {
        next = openSync(diskPath(at), O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      } catch (error) {
        if (isSystemError(error, 'ENOTDIR') && isSymbolicLink(at)) {
          throw symlinkRefused(parent, path);
        }
        if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) {
          return { descriptor, rest: segments.slice(depth).join('/'), missing: error };
        }
        throw error;
      }
      this.open.set(path, next);
      descriptor = next;
    }
    return { descriptor, rest: '' };
  }

  private checkWithLstat(relative: string, parent: string): void {
    let current = this.root;
    for (const segment of parent === '' ? [] : parent.split('/')) {
      current = `${current}/${segment}`;
      if (isSymbolicLink(current)) {
        throw symlinkRefused(relative, current.slice(this.root.length + 1));
      }
    }
  }
}

/**
 * Whether the open file `descriptor` is the one at `path` (as the kernel names it): false when a
 * directory on the path was swapped for a link to elsewhere before it was opened, or the file
 * was moved or deleted since. Always true where `/proc` is missing.
 */
export function isOpenedAt(descriptor: number, path: string): boolean {
  if (!usesDescriptorPaths()) return true;
  try {
    return readlinkSync(`${DESCRIPTOR_PATHS}/${descriptor}`, { encoding: 'buffer' }).equals(
      nameBytes(path),
    );
  } catch {
    return false;
  }
}

/** A path that opens the same file as `descriptor` while it is open (Linux), else `path`. */
export function pathOfDescriptor(descriptor: number, path: string): string {
  return usesDescriptorPaths() ? `${DESCRIPTOR_PATHS}/${descriptor}` : path;
}

function isSymbolicLink(path: string): boolean {
  try {
    return lstatSync(diskPath(path)).isSymbolicLink();
  } catch {
    return false;
  }
}
