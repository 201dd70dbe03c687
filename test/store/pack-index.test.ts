import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Digest } from '../../src/lib/index.js';
import {
  digestKey,
  newIndex,
  parseIndex,
  RECORD_BYTES,
  recordOf,
  sealIndex,
  setRecord,
} from '../../src/store/pack-index.js';
import { random } from '../helpers/trees.js';

const digestOf = (bytes: Buffer): Digest => `sha256:${bytes.toString('hex')}`;

describe('a pack index searched in memory', () => {
  it('finds every digest it lists and none it does not, as a scan of every record does', () => {
    const next = random(20261204);
    for (let round = 0; round < 30; round++) {
      // Digests that share their first byte, or their first four bytes, with others, and some
      // first bytes with no digest at all.
      const count = Math.floor(next() * 400);
      const keys: Buffer[] = [];
      for (let index = 0; index < count; index++) {
        const key = randomBytes(32);
        key[0] = Math.floor(next() * 8) * 17;
        const twin = keys[Math.floor(next() * keys.length)];
        if (twin !== undefined && next() < 0.3) twin.copy(key, 0, 0, 4);
        keys.push(key);
      }
      const sorted = [...new Map(keys.map((key) => [key.toString('hex'), key])).values()].sort(
        Buffer.compare,
      );
      const bytes = newIndex(sorted.length);
      for (const [place, key] of sorted.entries())
        setRecord(bytes, place, digestOf(key), place, 1, 1);
      const name = sealIndex(bytes);
      const index = parseIndex(name, bytes, 0);
      if (!index) throw new Error('the index did not parse');
      const scan = (key: Buffer): number => {
        for (let at = 0; at < index.count * RECORD_BYTES; at += RECORD_BYTES) {
          if (index.records.compare(key, 0, 32, at, at + 32) === 0) return at;
        }
        return -1;
      };
      for (const key of sorted) {
        expect(recordOf(index, digestKey(digestOf(key)))).toBe(scan(key));
        expect(recordOf(index, key)).not.toBe(-1);
      }
      // Absent: new digests (most turned away by the index's filter, some not), and listed ones
      // with their last byte changed (past the filter, found absent by the search).
      const fresh = Array.from({ length: 200 }, () => randomBytes(32));
      for (const key of fresh.slice(100)) key[0] = Math.floor(next() * 8) * 17;
      const changed = sorted.slice(0, 20).map((key) => Buffer.from(key));
      for (const key of changed) key[31] = (key[31] as number) ^ 0xff;
      const absent = [...fresh, ...changed];
      for (const key of absent) expect(recordOf(index, key)).toBe(scan(key));
      // Searched with the key inside a larger buffer, as the pack usage count does.
      const inside = Buffer.concat([randomBytes(7), sorted[0] ?? randomBytes(32)]);
      expect(recordOf(index, inside, 7)).toBe(scan(inside.subarray(7)));
    }
  });
});
