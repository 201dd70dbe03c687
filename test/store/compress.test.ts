import { randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { compressed, compressedElsewhere, compressWaitingHere } from '../../src/store/compress.js';

/** Objects of many sizes and kinds: empty, tiny, incompressible, repetitive, views into others. */
function objects(seed: number): Uint8Array[] {
  const shared = Buffer.from(`shared ${seed} `.repeat(2_000));
  return [
    new Uint8Array(0),
    Buffer.from('x'),
    Buffer.alloc(255, seed),
    Buffer.alloc(256, seed),
    randomBytes(5_000),
    Buffer.from(`line ${seed}\n`.repeat(3_000)),
    // Views at an offset into a larger buffer, and a plain Uint8Array.
    shared.subarray(7, 4_007),
    shared.subarray(10_000, 10_300),
    new Uint8Array(Buffer.from(`plain ${seed} `.repeat(100))),
  ];
}

describe('compressing on another thread', () => {
  it('gives each object the form compressing it here gives, and leaves the objects as they were', async () => {
    const all = objects(1);
    const copies = all.map((bytes) => Buffer.from(bytes));
    const out = await compressedElsewhere(all);
    expect(out).toHaveLength(all.length);
    for (const [index, bytes] of all.entries()) {
      const stored = out[index] as Uint8Array;
      expect(Buffer.from(stored).equals(Buffer.from(compressed(bytes)))).toBe(true);
      // Either the bytes as they are, or DEFLATE that inflates to them.
      const inflated = stored === bytes ? stored : inflateRawSync(stored);
      expect(Buffer.from(inflated).equals(copies[index] as Buffer)).toBe(true);
      // Copied to the worker, not moved: the caller's bytes are still there.
      expect(Buffer.from(bytes).equals(copies[index] as Buffer)).toBe(true);
    }
    // Small and incompressible ones are kept as they are; repetitive ones shrink.
    expect(out[1]).toBe(all[1]);
    expect(out[2]).toBe(all[2]);
    expect(out[4]).toBe(all[4]);
    expect((out[5] as Uint8Array).byteLength).toBeLessThan(1_000);
  });

  it('answers many calls at once, each with its own objects', async () => {
    const batches = Array.from({ length: 12 }, (_, index) => objects(index));
    const answers = await Promise.all(batches.map((batch) => compressedElsewhere(batch)));
    for (const [index, batch] of batches.entries()) {
      const answer = answers[index] as Uint8Array[];
      for (const [at, bytes] of batch.entries()) {
        expect(Buffer.from(answer[at] as Uint8Array).equals(Buffer.from(compressed(bytes)))).toBe(
          true,
        );
      }
    }
    expect(await compressedElsewhere([])).toEqual([]);
  });

  it('lets a thread that would wait take the jobs the worker has not begun, newest first', async () => {
    // 24 jobs of 1 MB each, slow to compress (random letters): the worker takes them oldest
    // first, this thread newest first.
    const batches = Array.from({ length: 24 }, () => [
      Buffer.from(randomBytes(768 * 1024).toString('base64')),
    ]);
    const settled = new Set<number>();
    const answers = batches.map((batch, index) =>
      compressedElsewhere(batch).then((out) => {
        settled.add(index);
        return out;
      }),
    );
    await compressWaitingHere();
    // What was left when it returned, the worker had begun: the newest were done here.
    expect(settled.has(batches.length - 1)).toBe(true);
    expect(settled.size).toBeGreaterThan(batches.length / 4);
    for (const [index, answer] of (await Promise.all(answers)).entries()) {
      const bytes = (batches[index] as Buffer[])[0] as Buffer;
      expect(Buffer.from(answer[0] as Uint8Array).equals(Buffer.from(compressed(bytes)))).toBe(
        true,
      );
    }
  });
});
