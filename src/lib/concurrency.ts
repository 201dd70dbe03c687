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

/**
 * Tasks started in a fixed order, at most `limit` at once, where the task (or step) at place `i`
 * starts only once every task at place `i - limit` or before has ended: so whatever a crash cut
 * short, each task that had started had every one `limit` or more places before it ended (a
 * restore's recovery relies on it). `before(i)` waits for those; `start(i, task)` does that and
 * starts the task; `finish()` waits for all. After a task failed, `before` and `start` throw its
 * error and `finish` does too, once every task started has ended.
 */
export function createOrderedWindow(limit: number) {
  const running: { place: number; ended: Promise<void> }[] = [];
  let failure: { error: unknown } | undefined;
  const before = async (place: number): Promise<void> => {
    while ((running[0]?.place ?? place) <= place - limit) await running.shift()?.ended;
    if (failure) throw failure.error;
  };
  return {
    before,
    async start(place: number, task: () => Promise<void>): Promise<void> {
      await before(place);
      const ended = task().catch((error: unknown) => {
        failure ??= { error };
      });
      running.push({ place, ended });
    },
    /** Waits for every task started; throws the first failure. */
    async finish(): Promise<void> {
      await Promise.all(running.splice(0).map(({ ended }) => ended));
      if (failure) throw failure.error;
    },
  };
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
