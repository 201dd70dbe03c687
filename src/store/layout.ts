import { lstat, mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import {
  kindOf,
  nodeCrypto,
  readPlainFile,
  withoutUrlPasswords,
  writeFileAtomic,
} from '../lib/index.js';
import { checkBucketExists, parseS3Url } from './s3-objects.js';

/** The name of the store directory at a workspace root, like `.git`. */
export const STORE_DIRECTORY_NAME = '.rewind';

/** The file that marks a `.rewind/` directory as Rewind's, and says which format it holds. */
export const STORE_MARKER_FILE = 'rewind.json';

/**
 * The lock every operation that changes the workspace or writes objects for an entry holds
 * (`workspace.lock` in the store): one at a time per store, and gc never between an object's
 * write and the entry that references it.
 */
export function workspaceLockOf(storeDirectory: string): string {
  return join(storeDirectory, 'workspace.lock');
}

/** The store format this version reads and writes. */
export const STORE_FORMAT_VERSION = 1;

const STORE_FORMAT = 'rewind-store';

/** The store's settings (`.rewind/config.json`): where its objects are kept, when not in it. */
export const STORE_CONFIG_FILE = 'config.json';

/** An opened store: where it lives and the workspace it belongs to. */
export interface StoreLocation {
  /** The workspace root: the directory that holds `.rewind/`. */
  workspace: string;
  /** The `.rewind/` directory itself. */
  directory: string;
  /**
   * Where its objects are kept when not under `objects/`: an `s3://BUCKET/PREFIX` location
   * (`.rewind/objects/` then caches what was read or written).
   */
  objects?: string;
  /**
   * Where its sessions' ledgers are kept when not under `sessions/`: a PostgreSQL database, the
   * store's id there (SPEC.md §5a), and the id of this copy of the workspace, which every intent
   * it journals carries so that only this copy finishes it after a crash (absent in stores made
   * before copies were named).
   */
  ledger?: { url: string; store: string; workspaceId?: string };
}

/** What a store's `config.json` says: where its objects and its ledgers are kept. */
interface StoreConfig {
  objects?: string;
  ledger?: { url: string; store: string; workspaceId?: string };
}

/** Whether `url` names a PostgreSQL database. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(?:ql)?:\/\//.test(url);
}

/**
 * A store's `config.json`, or `{}` when there is none. Throws `INVALID_ARGUMENT` for a file that
 * is not a JSON object, names something other than an `s3://` location for `objects`, or a
 * `ledger` that is not a `postgres://` URL with the store's id beside it.
 */
async function readStoreConfig(directory: string): Promise<StoreConfig> {
  const file = join(directory, STORE_CONFIG_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return {};
    throw error;
  }
  let parsed: { objects?: unknown; ledger?: unknown; store?: unknown; workspaceId?: unknown };
  const refuse = (what: string, cause?: unknown) =>
    new RewindError(
      'INVALID_ARGUMENT',
      `${file} ${what}. Fix it: it says where the store keeps its objects and ledgers, as {"objects": "s3://BUCKET/PREFIX", "ledger": "postgres://HOST/DB", "store": "ID"}.`,
      { data: { file }, ...(cause !== undefined && { cause }) },
    );
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch (error) {
    throw refuse(`is not JSON (${(error as Error).message})`, error);
  }
  const config: StoreConfig = {};
  if (parsed.objects !== undefined) {
    if (typeof parsed.objects !== 'string') throw refuse('has an "objects" that is not text');
    parseS3Url(parsed.objects);
    config.objects = parsed.objects;
  }
  if (parsed.ledger !== undefined) {
    if (typeof parsed.ledger !== 'string' || !isPostgresUrl(parsed.ledger)) {
      throw refuse('has a "ledger" that is not a postgres:// URL');
    }
    if (typeof parsed.store !== 'string' || parsed.store === '') {
      throw refuse('names a ledger database without the store\'s "store" id');
    }
    if (parsed.workspaceId !== undefined && typeof parsed.workspaceId !== 'string') {
      throw refuse('has a "workspaceId" that is not text');
    }
    config.ledger = {
      url: parsed.ledger,
      store: parsed.store,
      ...(parsed.workspaceId !== undefined && { workspaceId: parsed.workspaceId }),
    };
  }
  return config;
}

interface StoreMarker {
  format: string;
  version: number;
  createdAt: string;
}

async function readMarker(directory: string): Promise<StoreMarker | 'missing'> {
  let text: string;
  try {
    const read = await readPlainFile(join(directory, STORE_MARKER_FILE));
    if (!read.isFile) throw notOurs(directory, `its ${STORE_MARKER_FILE} is ${read.kind}`);
    text = read.value.toString('utf8');
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return 'missing';
    throw error;
  }
  try {
    const marker = JSON.parse(text) as StoreMarker;
    if (marker.format === STORE_FORMAT && Number.isInteger(marker.version)) return marker;
  } catch {}
  throw notOurs(directory, `its ${STORE_MARKER_FILE} is not a Rewind store marker`);
}

function notOurs(directory: string, why: string): RewindError {
  return new RewindError(
    'STORE_NOT_OURS',
    `${directory} exists but is not a Rewind store (${why}). ` +
      'Rewind will not touch it: move it aside, or run Rewind in another directory.',
    { data: { directory } },
  );
}

/**
 * What is at the store's path when it is not a directory (`a file`, `a symbolic link to nothing`,
 * ...); undefined when nothing is there or a directory is (a link to one included).
 */
async function nonDirectoryAt(path: string): Promise<string | undefined> {
  try {
    const stats = await stat(path);
    if (stats.isDirectory()) return undefined;
    if (stats.isFile()) return 'a file';
    if (stats.isFIFO()) return 'a named pipe';
    if (stats.isSocket()) return 'a socket';
    return 'a device';
  } catch (error) {
    if (isSystemError(error, 'ELOOP')) return 'a symbolic link that loops';
    if (!isSystemError(error, 'ENOENT') && !isSystemError(error, 'ENOTDIR')) throw error;
  }
  // Absent, unless it is a link to nothing: lstat sees the link itself.
  const link = await lstat(path).catch(() => undefined);
  return link?.isSymbolicLink() ? 'a symbolic link to nothing' : undefined;
}

/**
 * Throws `STORE_NOT_OURS` when something other than a directory is at the store's path: Rewind
 * would otherwise report no store, and an init would fail to create one there.
 */
async function checkIsDirectory(directory: string): Promise<void> {
  const kind = await nonDirectoryAt(directory);
  if (kind === undefined) return;
  throw new RewindError(
    'STORE_NOT_OURS',
    `${directory} is ${kind}, not a directory: Rewind keeps its store in a directory of that name, and will not touch what is there. ` +
      `Move it aside (mv ${directory} ${directory}.bak) and run \`rewind init\`, or run Rewind in another directory.`,
    { data: { directory, kind } },
  );
}

async function checkMarker(directory: string): Promise<boolean> {
  const marker = await readMarker(directory);
  if (marker === 'missing') {
    // Empty, or holding only what an init writes before the marker (the settings, written by
    // hand or by an init that was cut short, and either file being written at this very
    // moment): ours to make.
    const made = (file: string) => file.replace('.', '\\.');
    const beforeMarker = new RegExp(
      `^(?:${made(STORE_CONFIG_FILE)}|\\.(?:${made(STORE_MARKER_FILE)}|${made(STORE_CONFIG_FILE)})\\.\\d+\\.[0-9a-f]{12}\\.tmp)$`,
    );
    const names = await readdir(directory);
    if (names.every((name) => beforeMarker.test(name))) return false;
    throw notOurs(directory, `it has no ${STORE_MARKER_FILE}`);
  }
  if (marker.version > STORE_FORMAT_VERSION) {
    throw new RewindError(
      'STORE_VERSION_UNSUPPORTED',
      `${directory} holds store format ${marker.version}, written by a newer Rewind; ` +
        `this version reads format ${STORE_FORMAT_VERSION}. Upgrade Rewind to use this store.`,
      { data: { directory, version: marker.version } },
    );
  }
  return true;
}

/**
 * Throws `STORE_NOT_OURS` when the store's `objects` or `sessions` is there but is not a
 * directory Rewind made: something else fails every read and write, and a symbolic link would
 * have Rewind write wherever it points.
 */
async function checkStoreDirectories(directory: string): Promise<void> {
  for (const name of ['objects', 'sessions']) {
    const stats = await lstat(join(directory, name)).catch((error: unknown) => {
      if (isSystemError(error, 'ENOENT')) return undefined;
      throw error;
    });
    if (stats === undefined || stats.isDirectory()) continue;
    const kind = kindOf(stats);
    throw new RewindError(
      'STORE_NOT_OURS',
      `${join(directory, name)} is ${kind}, not a directory: Rewind reads and writes no ${name} through it, so the store cannot be used as it is. ` +
        'Rewind leaves it as it is: put the directory back (move this aside, restore it from a backup), then run `rewind verify`.',
      { data: { directory, path: join(directory, name), kind } },
    );
  }
}

/** What `.rewind/.gitignore` holds: everything in the store is left out of git. */
const STORE_GITIGNORE = '# Written by Rewind: the store is never committed.\n*\n';

/**
 * The absolute path of a workspace as given. Throws `WORKSPACE_INVALID` for one holding a NUL
 * byte, which no file name can (the system calls would refuse it with a bare type error).
 */
function rootOf(workspace: string): string {
  if (workspace.includes('\0')) {
    throw new RewindError(
      'WORKSPACE_INVALID',
      `The workspace path ${JSON.stringify(workspace)} holds a NUL byte, which no file name can. Give the directory of the project (--dir; --root for \`rewind ui\` and \`rewind mcp\`), or leave it out.`,
      { data: { path: workspace } },
    );
  }
  return resolve(workspace);
}

/**
 * config.json's mode: its user's alone, since a PostgreSQL URL in it may carry a password (one
 * given in the URL to `rewind init --ledger`; PGPASSWORD keeps it out of the file).
 */
const CONFIG_MODE = 0o600;

/**
 * Creates the store `.rewind/` in `workspace` (created too if missing), or checks the one that
 * is there, and writes its `.gitignore` so git leaves it out. Returns whether it was created.
 * Throws `STORE_NOT_OURS` when a `.rewind/` exists that Rewind did not make (or a `.rewind` that
 * is not a directory), and
 * `STORE_VERSION_UNSUPPORTED` when a newer Rewind made it.
 */
export async function initStore(
  workspace: string,
  options: {
    now?: () => Date;
    objects?: string;
    ledger?: string;
    /** The store's id in the ledger database: a new one unless given (`rewind attach`). */
    store?: string;
  } = {},
): Promise<StoreLocation & { isNew: boolean }> {
  if (options.objects !== undefined) parseS3Url(options.objects);
  if (options.ledger !== undefined && !isPostgresUrl(options.ledger)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `"${withoutUrlPasswords(options.ledger)}" is not a PostgreSQL URL: give postgres://USER@HOST:PORT/DATABASE (the password in PGPASSWORD, or in the URL).`,
      { data: {} },
    );
  }
  const root = rootOf(workspace);
  const directory = join(root, STORE_DIRECTORY_NAME);
  await checkIsDirectory(directory);
  await mkdir(directory, { recursive: true });
  const exists = await checkMarker(directory);
  const configured = await readStoreConfig(directory);
  const isObjectsAsked = options.objects !== undefined && options.objects !== configured.objects;
  const isLedgerAsked = options.ledger !== undefined && options.ledger !== configured.ledger?.url;
  if (isObjectsAsked || isLedgerAsked) {
    if (exists) {
      const [what, where, asked] = isObjectsAsked
        ? ['objects', configured.objects ?? '.rewind/objects', options.objects]
        : ['ledgers', configured.ledger ? 'in a database' : '.rewind/sessions', 'another place'];
      throw new RewindError(
        'INVALID_ARGUMENT',
        `The store in ${root} keeps its ${what} in ${where}; it cannot move them to ${asked}. ` +
          'Leave the option out to use the store as it is, or start a new store elsewhere.',
        { data: { setting: what } },
      );
    }
    if (isObjectsAsked) await checkBucketExists(options.objects as string);
    // Before the marker: a store is never found without the settings it was made with.
    const config = {
      ...(options.objects !== undefined && { objects: options.objects }),
      ...(options.ledger !== undefined && {
        ledger: options.ledger,
        store: options.store ?? nodeCrypto().randomUUID(),
        workspaceId: nodeCrypto().randomUUID(),
      }),
    };
    await writeFileAtomic(
      join(directory, STORE_CONFIG_FILE),
      `${JSON.stringify(config, null, 2)}\n`,
      { mode: CONFIG_MODE },
    );
  }
  const settings = await readStoreConfig(directory);
  if (!exists && settings.ledger && settings.ledger.workspaceId === undefined) {
    // Settings written by hand: this copy of the workspace gets its id before the marker.
    await writeFileAtomic(
      join(directory, STORE_CONFIG_FILE),
      `${JSON.stringify(
        {
          ...(settings.objects !== undefined && { objects: settings.objects }),
          ledger: settings.ledger.url,
          store: settings.ledger.store,
          workspaceId: nodeCrypto().randomUUID(),
        },
        null,
        2,
      )}\n`,
      { mode: CONFIG_MODE },
    );
  }
  if (!exists) {
    const marker: StoreMarker = {
      format: STORE_FORMAT,
      version: STORE_FORMAT_VERSION,
      createdAt: (options.now ?? (() => new Date()))().toISOString(),
    };
    await writeFileAtomic(
      join(directory, STORE_MARKER_FILE),
      `${JSON.stringify(marker, null, 2)}\n`,
    );
  }
  await checkStoreDirectories(directory);
  // Made on every init, so an init interrupted after the marker is finished by the next one.
  await mkdir(join(directory, 'objects'), { recursive: true });
  await mkdir(join(directory, 'sessions'), { recursive: true });
  // The store keeps itself out of git: `git add -A` must never commit it (or the secrets in it).
  const gitignore = join(directory, '.gitignore');
  if ((await readFile(gitignore, 'utf8').catch(() => undefined)) !== STORE_GITIGNORE) {
    await writeFileAtomic(gitignore, STORE_GITIGNORE);
  }
  return { workspace: root, directory, isNew: !exists, ...(await readStoreConfig(directory)) };
}

/**
 * Opens the store of `workspace` exactly (no search upward). Throws `STORE_NOT_FOUND` when there
 * is none, and the errors of {@link initStore} when it is not a usable one (`STORE_NOT_OURS` for
 * a `.rewind` that is a file).
 */
export async function openStore(workspace: string): Promise<StoreLocation> {
  const root = rootOf(workspace);
  const directory = join(root, STORE_DIRECTORY_NAME);
  const rootStats = await stat(root).catch(() => undefined);
  if (rootStats && !rootStats.isDirectory()) {
    throw new RewindError(
      'WORKSPACE_INVALID',
      `The workspace ${root} is a file, not a directory. Give the directory of the project (--dir; --root for \`rewind ui\` and \`rewind mcp\`), or leave it out.`,
      { data: { path: root } },
    );
  }
  await checkIsDirectory(directory);
  let isDirectory = false;
  try {
    isDirectory = (await stat(directory)).isDirectory();
  } catch (error) {
    if (!isSystemError(error, 'ENOENT') && !isSystemError(error, 'ENOTDIR')) throw error;
  }
  if (!isDirectory || !(await checkMarker(directory))) {
    throw new RewindError(
      'STORE_NOT_FOUND',
      `There is no Rewind store in ${root}. Run \`rewind init\` there first, or name the workspace that has one (--dir; --root for \`rewind ui\` and \`rewind mcp\`).`,
      { data: { workspace: root } },
    );
  }
  await checkStoreDirectories(directory);
  return { workspace: root, directory, ...(await readStoreConfig(directory)) };
}

/**
 * Finds the nearest directory at or above `start` that holds a `.rewind/`, like git finds `.git`.
 * Returns undefined when there is none up to the filesystem root. The nearest `.rewind` of any
 * kind ends the search: one that is not a usable store is refused as {@link openStore} does.
 */
export async function findStore(start: string): Promise<StoreLocation | undefined> {
  let current = rootOf(start);
  for (;;) {
    // Anything of the store's name stops the search: a directory is the store (or is refused as
    // not ours), and anything else is refused as such, never passed over for a store further up.
    if (await lstat(join(current, STORE_DIRECTORY_NAME)).catch(() => undefined))
      return openStore(current);
    const parent = dirname(current);
    if (parent === current) return undefined;
    current = parent;
  }
}
