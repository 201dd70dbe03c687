import { describe, expect, it } from 'vitest';
import { createLimiter } from '../../src/lib/index.js';

describe('createLimiter', () => {
  it('runs at most the limit at once, in the order asked, through failures, until all are done', async () => {
    const gate = createLimiter(3);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const task = (index: number) =>
      gate(async () => {
        started.push(index);
        running += 1;
        most = Math.max(most, running);
        // Uneven times, so that tasks end out of order and hand their places on.
        await new Promise((done) => setTimeout(done, (index * 7) % 5));
        running -= 1;
        if (index % 4 === 0) throw new Error(`task ${index} failed`);
        return index;
      });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, index) => task(index)),
    );
    expect(most).toBe(3);
    expect(started).toEqual(Array.from({ length: 20 }, (_, index) => index));
    expect(outcomes.map((outcome) => outcome.status)).toEqual(
      Array.from({ length: 20 }, (_, index) => (index % 4 === 0 ? 'rejected' : 'fulfilled')),
    );
    // Every place was given back: the gate takes 3 at once again.
    let again = 0;
    await Promise.all(
      [1, 2, 3].map(() =>
        gate(async () => {
          again += 1;
          await new Promise((done) => setTimeout(done, 5));
          expect(again).toBe(3);
        }),
      ),
    );
  });
});
