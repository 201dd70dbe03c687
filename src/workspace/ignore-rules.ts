// What snapshots leave out: git's rules for the workspace, then Rewind's own, as git applies them.
import { lstatSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative as relativePath, resolve, sep } from 'node:path';
import ignore, { type Ignore } from 'ignore';
import { isSystemError } from '../errors.js';
import {
  canonicalJson,
  type Digest,
  digestBytes,
  diskPath,
  isAbsentSync,
  readPlainFileSync,
} from '../lib/index.js';

/** Rewind's own ignore file, in gitignore syntax, in any directory; it may re-include with `!`. */
export const IGNORE_FILE = '.rewindignore';

/**
 * The files that list what a snapshot leaves out, in the order their rules apply within one
 * directory: git's, then Rewind's, so a `.rewindignore` rule wins over a `.gitignore` rule of the
 * same directory (`!.env` keeps an env file that git ignores).
 */
export const IGNORE_FILES = ['.gitignore', IGNORE_FILE] as const;

/** Names never snapshotted, at any depth: Rewind's own store and git's. */
const ALWAYS_EXCLUDED = new Set(['.rewind', '.git']);

/** Whether a name is one never snapshotted, at any depth (`.rewind`, `.git`). */
export function isAlwaysExcluded(name: string): boolean {
  return ALWAYS_EXCLUDED.has(name);
}

/**
 * The name of the temporary copy a file is restored through, beside it (see `apply.ts`): never
 * snapshotted either, though a crash may leave one for a while (until recovery removes it, which
 * a command in another session does not do).
 */
export const RESTORE_TEMPORARY = /^\..+\.rewind-[0-9a-f]{12}\.rewind-tmp$/s;

/** True when `names` (a directory's listing) holds an ignore file. */
export function holdsIgnoreFile(names: readonly string[]): boolean {
  return names.includes(IGNORE_FILES[0]) || names.includes(IGNORE_FILES[1]);
}

/**
 * The rules that apply to a workspace from outside it: those of the git repository it is in
 * (`info/exclude`, then the `.gitignore` files from the repository's root down to the
 * workspace's parent), each with the path from its directory to the workspace root. Rolling
 * back never changes them, but a checkpoint records them (their digest), so what a checkpoint
 * left out can be told later even if they changed.
 */
export interface OutsideRules {
  readonly sets: readonly { readonly prefix: string; readonly text: string }[];
}

/** No rules from outside: a workspace in no git repository. */
export const NO_OUTSIDE_RULES: OutsideRules = { sets: [] };

function readText(file: string): string | undefined {
  try {
    return readFileSync(diskPath(file), 'utf8');
  } catch (error) {
    if (
      isSystemError(error, 'ENOENT') ||
      isSystemError(error, 'ENOTDIR') ||
      isSystemError(error, 'EISDIR')
    ) {
      return undefined;
    }
    throw error;
  }
}

/**
 * The text of an ignore file in the workspace, if it is a plain file. One that is a link is not
 * followed (git does not either: it could name a file outside, or /dev/zero), and a named pipe
 * is not waited on; either is read as no rules, as a folder on the way that is no folder.
 */
function readIgnoreFile(file: string): string | undefined {
  // Most directories have none: a rollback or a walk asks in every directory it enters.
  if (isAbsentSync(diskPath(file))) return undefined;
  try {
    const read = readPlainFileSync(diskPath(file));
    return read.isFile ? read.value.toString('utf8') : undefined;
  } catch (error) {
    if (
      isSystemError(error, 'ENOENT') ||
      isSystemError(error, 'ENOTDIR') ||
      isSystemError(error, 'ELOOP')
    ) {
      return undefined;
    }
    throw error;
  }
}

/** Whether `absolute` is a directory itself, not a link to one (nor a link that loops). */
export function isRealDirectory(absolute: string): boolean {
  try {
    return lstatSync(diskPath(absolute)).isDirectory();
  } catch (error) {
    if (
      isSystemError(error, 'ENOENT') ||
      isSystemError(error, 'ENOTDIR') ||
      isSystemError(error, 'ELOOP')
    ) {
      return false;
    }
    throw error;
  }
}

/** The directory git keeps its shared files in, for a `.git` directory or a worktree's `.git` file. */
function commonGitDirectory(dotGit: string): string | undefined {
  try {
    if (statSync(dotGit).isDirectory()) return dotGit;
  } catch {
    return undefined;
  }
  const pointer = /^gitdir:\s*(.+)$/m.exec(readText(dotGit) ?? '')?.[1]?.trim();
  if (!pointer) return undefined;
  const gitDirectory = resolve(dirname(dotGit), pointer);
  const common = readText(join(gitDirectory, 'commondir'))?.trim();
  return common ? resolve(gitDirectory, common) : gitDirectory;
}

/**
 * Reads the rules of the git repository that holds `root` (if any): its `info/exclude` and the
 * `.gitignore` files above `root`. Git's global excludes file is not read: it belongs to a person,
 * not to the project.
 */
export function readOutsideRules(root: string): OutsideRules {
  const above: string[] = [];
  for (let directory = root; ; ) {
    const gitDirectory = commonGitDirectory(join(directory, '.git'));
    if (gitDirectory !== undefined) {
      const toRoot = relativePath(directory, root).split(sep).join('/');
      const sets: { prefix: string; text: string }[] = [];
      const exclude = readText(join(gitDirectory, 'info', 'exclude'));
      if (exclude?.trim()) sets.push({ prefix: toRoot, text: exclude });
      // From the repository's root down: deeper files are consulted first, so they win.
      for (const outer of above.reverse()) {
        const text = readText(join(outer, '.gitignore'));
        if (text?.trim()) {
          sets.push({ prefix: relativePath(outer, root).split(sep).join('/'), text });
        }
      }
      return { sets };
    }
    const parent = dirname(directory);
    if (parent === directory) return NO_OUTSIDE_RULES;
    directory = parent;
    above.push(directory);
  }
}

/** The digest that names a set of outside rules; undefined for none. */
export function digestOutsideRules(outside: OutsideRules): Digest | undefined {
  return outside.sets.length === 0 ? undefined : digestBytes(encodeOutsideRules(outside));
}

/** The bytes a checkpoint stores for its outside rules. */
export function encodeOutsideRules(outside: OutsideRules): string {
  return canonicalJson({ sets: outside.sets.map(({ prefix, text }) => ({ prefix, text })) });
}

/** Outside rules from what {@link encodeOutsideRules} stored. */
export function decodeOutsideRules(bytes: Uint8Array): OutsideRules {
  const value = JSON.parse(Buffer.from(bytes).toString('utf8')) as OutsideRules;
  return {
    sets: value.sets.map(({ prefix, text }) => ({ prefix: String(prefix), text: String(text) })),
  };
}

interface RuleSet {
  /** The path, relative to the set's own directory, of a path relative to the workspace root. */
  local(relative: string): string;
  rules: Ignore;
}

/**
 * The ignore rules in force in one directory: outside rules, then the ignore files of every
 * directory from the workspace root down to it, applied as git applies `.gitignore` files (the
 * deepest file with a matching rule wins, `!` re-includes, and nothing under an ignored directory
 * is looked at).
 */
export class IgnoreRules {
  readonly #sets: readonly RuleSet[];

  private constructor(sets: readonly RuleSet[]) {
    this.#sets = sets;
  }

  /** Only the rules from outside the workspace: where the rules of a stored tree start. */
  static outside(outside: OutsideRules): IgnoreRules {
    return new IgnoreRules(
      outside.sets.map(({ prefix, text }) => ({
        local: (relative) => (prefix === '' ? relative : `${prefix}/${relative}`),
        rules: ignore().add(text),
      })),
    );
  }

  /** The rules at the workspace root: outside rules and the root's ignore files, read from disk. */
  static root(root: string, outside: OutsideRules): IgnoreRules {
    return IgnoreRules.outside(outside).enter(root, '');
  }

  /**
   * The rules inside `directory` (relative path `relative`), adding its ignore files, read from
   * disk. A directory that is not one on disk (absent, a file, a link) adds none: the callers
   * enter each directory from the root down, so no rule is read through a link.
   */
  enter(absolute: string, relative: string): IgnoreRules {
    if (relative !== '' && !isRealDirectory(absolute)) return this;
    const texts: string[] = [];
    for (const name of IGNORE_FILES) {
      const text = readIgnoreFile(`${absolute}/${name}`);
      if (text !== undefined) texts.push(text);
    }
    return this.within(relative, texts);
  }

  /** The rules inside the directory `relative`, whose ignore files hold `texts` (git's first). */
  within(relative: string, texts: readonly string[]): IgnoreRules {
    if (texts.length === 0) return this;
    const rules = ignore();
    for (const text of texts) rules.add(text);
    const local =
      relative === '' ? (path: string) => path : (path: string) => path.slice(relative.length + 1);
    return new IgnoreRules([...this.#sets, { local, rules }]);
  }

  /** True when the entry at `relative` (a directory when `isDirectory`) is left out. */
  isIgnored(relative: string, name: string, isDirectory: boolean): boolean {
    if (ALWAYS_EXCLUDED.has(name) || (!isDirectory && RESTORE_TEMPORARY.test(name))) return true;
    // The rules themselves are always kept: a rule can never hide a change to the rules (an
    // agent writing `*` to .rewindignore would otherwise make every later change invisible,
    // and no rollback or undo would take the rule back).
    if (!isDirectory && (IGNORE_FILES as readonly string[]).includes(name)) return false;
    for (let index = this.#sets.length - 1; index >= 0; index--) {
      const set = this.#sets[index];
      if (!set) continue;
      const local = set.local(relative);
      const result = set.rules.test(isDirectory ? `${local}/` : local);
      if (result.ignored) return true;
      if (result.unignored) return false;
    }
    return false;
  }
}
