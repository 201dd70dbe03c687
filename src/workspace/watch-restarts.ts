// How soon a watcher starts again after it lost events or failed to start: at once after a
// steady spell, then less and less often while it keeps failing, never giving up.

/** The longest wait between two starts. */
export const LONGEST_WAIT_MS = 60_000;

/** A watch live this long before it was lost was steady: the next start is at once again. */
const STEADY_MS = 10_000;

/** Restarts in a row after which the watcher says, once, that it keeps failing. */
export const TOLD_AFTER = 8;

/**
 * The pace of a watcher's restarts. The first after a steady spell (a snapshot took the watch's
 * word, or it was live for 10 s) is at once: a directory moved makes the watch start again, and
 * the next checkpoint should find it live. Each one after waits twice as long as the one before
 * (0.1 s, 0.2 s, ...), at most a minute: an inotifywait killed over and over, a workspace a build
 * keeps churning, cost a start a minute, not a loop at full speed; and it never stops trying
 * while the process lives.
 */
export class RestartPacer {
  /** Restarts since the last steady spell. */
  #streak = 0;
  #liveSince: number | undefined;

  /** The watch went live. */
  live(): void {
    this.#liveSince = Date.now();
  }

  /** A snapshot took the watch's word: it works. */
  steady(): void {
    this.#streak = 0;
  }

  /** The watch was lost or failed to start: how long to wait before the next start. */
  next(): number {
    if (this.#liveSince !== undefined && Date.now() - this.#liveSince >= STEADY_MS) {
      this.#streak = 0;
    }
    this.#liveSince = undefined;
    const streak = this.#streak++;
    return streak === 0 ? 0 : Math.min(LONGEST_WAIT_MS, 50 * 2 ** streak);
  }

  /** True at the restart that makes it {@link TOLD_AFTER} in a row (to be said once). */
  get isToBeTold(): boolean {
    return this.#streak === TOLD_AFTER;
  }
}

/** Quiet this long after the last ignored directory made, the watch starts again without them. */
export const QUIET_MS = 300;

/** ...or this long after the first, when they keep coming. */
const LONGEST_QUIET_WAIT_MS = 2_000;

/**
 * Starts for them come at most this often: a build that removes and makes its ignored output
 * again and again (inotifywait watches a directory made again where one left out was) would
 * otherwise cost a start, and the next snapshot a find, each time.
 */
export const IGNORED_SPACING_MS = 10_000;

/**
 * The directories made or moved in since the watch started that the ignore rules leave out (an
 * `npm install`'s `node_modules`, pytest's `__pycache__`): inotifywait watches each of them with
 * everything under it until it starts again, so the events under them are dropped, and
 * `onSettled` is told to start it again once no new one came for {@link QUIET_MS} (at most 2 s
 * after the first): a burst of them costs one start, not one each, and such starts come at most
 * every {@link IGNORED_SPACING_MS}. Not a failure: nothing went unseen.
 */
export class IgnoredSinceStart {
  readonly #directories = new Set<string>();
  readonly #onSettled: () => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #firstAt = 0;
  #settledAt = Number.NEGATIVE_INFINITY;

  constructor(onSettled: () => void) {
    this.#onSettled = onSettled;
  }

  get size(): number {
    return this.#directories.size;
  }

  /** Whether `relative` is one of them, or under one. */
  holds(relative: string): boolean {
    if (this.#directories.size === 0) return false;
    for (let at = relative.length; at > 0; at = relative.lastIndexOf('/', at - 1)) {
      if (this.#directories.has(relative.slice(0, at))) return true;
    }
    return false;
  }

  add(relative: string): void {
    const now = Date.now();
    if (this.#directories.size === 0) this.#firstAt = now;
    this.#directories.add(relative);
    clearTimeout(this.#timer);
    const quiet = Math.min(QUIET_MS, this.#firstAt + LONGEST_QUIET_WAIT_MS - now);
    const delay = Math.max(quiet, this.#settledAt + IGNORED_SPACING_MS - now, 0);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#settledAt = Date.now();
      this.#onSettled();
    }, delay);
    this.#timer.unref();
  }

  /** Takes `relative` off, when it was one of them that went (deleted): a file may take its name. */
  delete(relative: string): boolean {
    const isOne = this.#directories.delete(relative);
    if (this.#directories.size === 0) this.clear();
    return isOne;
  }

  /** At a start: the directories left out are listed again, so these are among them. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#directories.clear();
  }
}
