import { describe, expect, it } from 'vitest';
import { createLimiter, createOrderedWindow } from '../../src/lib/index.js';
import { random as seeded } from '../helpers/trees.js';

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

describe('createOrderedWindow', () => {
  it('starts each task only once every one `limit` places before it has ended, at most `limit` at once', async () => {
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const random = seeded(seed);
      const limit = 1 + Math.floor(random() * 8);
      const window = createOrderedWindow(limit);
      const tasks: number[] = [];
      const ended = new Set<number>();
      /** The tasks `limit` or more places before `place` that have not ended: must be none. */
      const unfinishedBefore = (place: number) =>
        tasks.filter((task) => task <= place - limit && !ended.has(task));
      let running = 0;
      let most = 0;
      for (let place = 0; place < 80; place++) {
        if (random() < 0.2) {
          // A step done in between, not a task (a directory made).
          await window.before(place);
          expect(unfinishedBefore(place)).toEqual([]);
          continue;
        }
        const delay = Math.floor(random() * 4);
        await window.start(place, async () => {
          expect(unfinishedBefore(place)).toEqual([]);
          running += 1;
          most = Math.max(most, running);
          await new Promise((done) => setTimeout(done, delay));
          running -= 1;
          ended.add(place);
        });
        tasks.push(place);
      }
      await window.finish();
      expect(ended.size).toBe(tasks.length);
      expect(most).toBeLessThanOrEqual(limit);
      if (limit > 1) expect(most).toBeGreaterThan(1);
    }
  });

  it('starts nothing after a task failed, and throws its error once the others have ended', async () => {
    const window = createOrderedWindow(4);
    const ended: number[] = [];
    const task = (place: number, fails: boolean) => async () => {
      await new Promise((done) => setTimeout(done, fails ? 1 : 10));
      ended.push(place);
      if (fails) throw new Error(`task ${place} failed`);
    };
    await window.start(0, task(0, false));
    await window.start(1, task(1, true));
    await window.start(2, task(2, false));
    await new Promise((done) => setTimeout(done, 5));
    await expect(window.start(6, task(6, false))).rejects.toThrow('task 1 failed');
    await expect(window.finish()).rejects.toThrow('task 1 failed');
    expect(ended.sort()).toEqual([0, 1, 2]);
  });
});
