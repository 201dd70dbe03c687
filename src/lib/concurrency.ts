// Running work side by side, and timers that wait as long as asked.
/**
 * Runs `worker` on every item with at most `limit` calls in flight, and resolves when all are
 * done. Rejects with the first error; calls already started run to their end.
 */
export async function forEachConcurrently<T>(
  items: readonly T[],
  limit: number,
  worker: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await worker(items[next++] as T);
  });
  await Promise.all(runners);
}

/** Runs a task when its turn comes: see {@link createLimiter}. */
export type Limiter = <R>(task: () => Promise<R>) => Promise<R>;

/**
 * A gate that lets at most `limit` tasks run at once; the others wait their turn, first come
 * first served. For work that fans out recursively, where {@link forEachConcurrently}'s one list
 * of items does not exist up front.
 */
export function createLimiter(limit: number): Limiter {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (task) => {
    if (running < limit) running += 1;
    // A finishing task hands its place straight to the next one, so `running` never overshoots.
    else await new Promise<void>((resume) => waiting.push(resume));
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running -= 1;
    }
  };
}

/**
 * The longest delay a timer takes: Node runs a longer one after 1 ms, with a warning (a
 * 32-bit signed count of milliseconds, about 24.8 days).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` as a timer takes it: a longer delay waits as long as a timer can, never 1 ms. */
export function timerDelayOf(ms: number): number {
  return Math.min(ms, MAX_TIMER_MS);
}
