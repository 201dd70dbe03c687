import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareNames, decodeName, diskPath, displayPath, nameBytes } from '../../src/lib/index.js';

/** The bytes a Linux file name may hold: any but `/` and NUL. */
const nameOfBytes = fc
  .uint8Array({ minLength: 1, maxLength: 40 })
  .map((bytes) => Buffer.from(bytes.map((byte) => (byte === 0 || byte === 0x2f ? 0x41 : byte))));

describe('names that are bytes', () => {
  it('every byte string decodes to a string that gives back exactly those bytes', () => {
    fc.assert(
      fc.property(nameOfBytes, (bytes) => {
        expect(nameBytes(decodeName(bytes)).equals(bytes)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('valid UTF-8 decodes as itself, and a string without escapes is handed to fs as is', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1 }), (text) => {
        expect(decodeName(Buffer.from(text, 'utf8'))).toBe(text);
        expect(diskPath(text)).toBe(text);
      }),
    );
  });

  it('two different byte strings never decode to the same string, and order as their bytes', () => {
    fc.assert(
      fc.property(nameOfBytes, nameOfBytes, (a, b) => {
        const [x, y] = [decodeName(a), decodeName(b)];
        expect(x === y).toBe(a.equals(b));
        expect(Math.sign(compareNames(x, y))).toBe(Math.sign(Buffer.compare(a, b)));
      }),
      { numRuns: 2000 },
    );
  });

  it('orders names as their bytes, with shared beginnings and characters on either side of U+D800', () => {
    // Escaped bytes (U+DC80 to U+DCFF), a pair's halves and U+E000 and up order otherwise in
    // UTF-16 than in UTF-8: the fast comparison must not be used for them.
    const piece = fc.constantFrom(
      'a',
      'Z',
      '.',
      '~',
      'é',
      '\u07ff',
      '\ud7ff',
      '\ue000',
      '\ufffd',
      '😀',
      '\u{10080}',
      '\udc80',
      '\udcff',
    );
    const text = fc.array(piece, { maxLength: 6 }).map((pieces) => pieces.join(''));
    fc.assert(
      fc.property(text, text, text, (shared, a, b) => {
        const [x, y] = [`${shared}${a}`, `${shared}${b}`];
        expect(Math.sign(compareNames(x, y))).toBe(
          Math.sign(Buffer.compare(nameBytes(x), nameBytes(y))),
        );
      }),
      { numRuns: 5000 },
    );
  });

  it('keeps surrogate pairs (emoji) apart from escaped bytes', () => {
    // U+10080 is the pair D800 DC80: its low half is no escaped byte.
    expect(diskPath('a\u{10080}')).toBe('a\u{10080}');
    expect(decodeName(Buffer.from([0x61, 0xff, 0xc3]))).toBe('a\udcff\udcc3');
    // An overlong encoding and an encoded surrogate are not valid UTF-8: kept as bytes.
    expect(nameBytes(decodeName(Buffer.from([0xc0, 0xaf, 0xed, 0xa0, 0x80])))).toEqual(
      Buffer.from([0xc0, 0xaf, 0xed, 0xa0, 0x80]),
    );
    expect(displayPath('caf\udce9.txt')).toBe('caf\\xe9.txt');
  });
});
