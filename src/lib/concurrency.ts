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
