import { createHash } from 'node:crypto';
import { open, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { digestBytes, digestFile, isDigest, isDigestCold } from '../../src/lib/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('digests', () => {
  it('hashes bytes and text to sha256-prefixed lowercase hex', () => {
    expect(digestBytes('abc')).toBe(
      'sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    expect(digestBytes(Buffer.from('abc'))).toBe(digestBytes('abc'));
    expect(isDigest(digestBytes(''))).toBe(true);
    expect(isDigest('sha256:ABC')).toBe(false);
  });

  it('takes as a digest only the prefix and 64 lowercase hexadecimal digits', () => {
    const good = digestBytes('abc');
    const hex = good.slice('sha256:'.length);
    for (const bad of [
      hex,
      `sha256:${hex.toUpperCase()}`,
      `sha256:${hex.slice(1)}`,
      `${good}0`,
      `sha512:${hex}`,
      `sha256:${hex.slice(0, 63)}g`,
      `sha256:${hex.slice(0, 63)}\u0660`,
      `sha256:${hex.slice(0, 63)}\n`,
      ` ${good.slice(1)}`,
      42,
      undefined,
    ]) {
      expect(isDigest(bad), String(bad)).toBe(false);
      expect(isDigestCold(bad), String(bad)).toBe(false);
    }
    expect(isDigest(`sha256:${'0123456789abcdef'.repeat(4)}`)).toBe(true);
    expect(isDigestCold(`sha256:${'0123456789abcdef'.repeat(4)}`)).toBe(true);
    expect(isDigestCold(`${good}\n`)).toBe(false);
  });

  it('answers the same by the regular expression as by the loop, for strings near a digest', () => {
    let seed = 7;
    const random = (below: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % below;
    };
    const characters = '0123456789abcdefABCDEFgxyz:\n \u0660\u00e9\ud83d';
    for (let round = 0; round < 20_000; round++) {
      const chars = [...digestBytes(String(round))];
      // A few characters changed, added or taken away, anywhere (the prefix too).
      for (let edits = random(3); edits > 0; edits--) {
        const at = random(chars.length + 1);
        const character = characters[random(characters.length)] as string;
        const kind = random(3);
        if (kind === 0) chars[at] = character;
        else if (kind === 1) chars.splice(at, 0, character);
        else chars.splice(at, 1);
      }
      const text = chars.join('');
      expect(isDigestCold(text), text).toBe(isDigest(text));
    }
  });

  it('hashes a file to the same digest as its bytes, with its size', async () => {
    const directory = await makeTempDirectory();
    const file = join(directory, 'f');
    const content = Buffer.alloc(3 * 1024 * 1024 + 7, 'xyz');
    await writeFile(file, content);
    expect(await digestFile(file)).toEqual({
      digest: digestBytes(content),
      sizeBytes: content.length,
    });
  });

  it('hashes a 1 GiB file in constant memory, never reading it whole', async () => {
    const directory = await makeTempDirectory();
    const file = join(directory, 'big');
    const sizeBytes = 1024 ** 3;
    const handle = await open(file, 'w');
    await handle.truncate(sizeBytes); // sparse: 1 GiB of zeros without writing 1 GiB
    await handle.write(Buffer.from('end'), 0, 3, sizeBytes - 3);
    await handle.close();

    const expected = createHash('sha256');
    const zeros = Buffer.alloc(64 * 1024 * 1024);
    for (let left = sizeBytes - 3; left > 0; left -= Math.min(left, zeros.length)) {
      expected.update(zeros.subarray(0, Math.min(left, zeros.length)));
    }
    expected.update('end');

    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 5);
    const result = await digestFile(file);
    clearInterval(sampler);
    expect(result).toEqual({ digest: `sha256:${expected.digest('hex')}`, sizeBytes });
    expect(peak - before).toBeLessThan(128 * 1024 * 1024);
  }, 60_000);
});
