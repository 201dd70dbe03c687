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
