import { readFileSync } from 'node:fs';
import ignore, { type Ignore } from 'ignore';
import { isSystemError } from '../errors.js';

/** The file that lists what a snapshot leaves out, in gitignore syntax, in any directory. */
export const IGNORE_FILE = '.rewindignore';

/** Names never snapshotted, at any depth: Rewind's own store and git's. */
const ALWAYS_EXCLUDED = new Set(['.rewind', '.git']);

interface RuleSet {
  /** The directory of the `.rewindignore`, relative to the workspace root ('' for the root). */
  base: string;
  rules: Ignore;
}

/**
 * The ignore rules in force in one directory: every `.rewindignore` from the workspace root down
 * to it, applied as git applies `.gitignore` files (the deepest file with a matching rule wins,
 * `!` re-includes, and nothing under an ignored directory is looked at).
 */
export class IgnoreRules {
  readonly #sets: readonly RuleSet[];

  private constructor(sets: readonly RuleSet[]) {
    this.#sets = sets;
  }

  /** The rules at the workspace root. */
  static root(root: string): IgnoreRules {
    return new IgnoreRules([]).enter(root, '');
  }

  /** The rules inside `directory` (relative path `relative`), adding its `.rewindignore` if any. */
  enter(absolute: string, relative: string): IgnoreRules {
    let text: string;
    try {
      text = readFileSync(`${absolute}/${IGNORE_FILE}`, 'utf8');
    } catch (error) {
      if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return this;
      throw error;
    }
    return new IgnoreRules([...this.#sets, { base: relative, rules: ignore().add(text) }]);
  }

  /** True when the entry at `relative` (a directory when `isDirectory`) is left out. */
  isIgnored(relative: string, name: string, isDirectory: boolean): boolean {
    if (ALWAYS_EXCLUDED.has(name)) return true;
    for (let index = this.#sets.length - 1; index >= 0; index--) {
      const set = this.#sets[index];
      if (!set) continue;
      const local = set.base === '' ? relative : relative.slice(set.base.length + 1);
      const result = set.rules.test(isDirectory ? `${local}/` : local);
      if (result.ignored) return true;
      if (result.unignored) return false;
    }
    return false;
  }
}
