import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/lib/index.js';

describe('canonicalJson', () => {
  it('sorts keys by UTF-16 code units at every depth and writes no white space', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: null, y: true }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[3,{"y":true,"z":null}]},"b":1}',
    );
  });

  it('orders keys as RFC 8785 does, by code units rather than code points', () => {
    // U+20AC (euro) is one code unit 0x20AC; U+1F600 is the surrogate pair D83D DE00; "\r" is 0x0D.
    expect(canonicalJson({ '\u20ac': 1, '\u{1f600}': 2, '\r': 3, '1': 4 })).toBe(
      '{"\\r":3,"1":4,"€":1,"😀":2}',
    );
  });

  it('writes numbers in their shortest round-trip form', () => {
    expect(canonicalJson([1e21, 1e-7, 0.1, -0, 333333333.3333333])).toBe(
      '[1e+21,1e-7,0.1,0,333333333.3333333]',
    );
  });

  it('leaves out object members whose value is undefined', () => {
    expect(canonicalJson({ a: undefined, b: 2 })).toBe('{"b":2}');
  });

  it('refuses values JSON cannot hold', () => {
    expect(() => canonicalJson({ a: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson([Number.POSITIVE_INFINITY])).toThrow(TypeError);
    expect(() => canonicalJson({ a: 1n })).toThrow(TypeError);
  });

  it('gives equal bytes for equal values built in different orders', () => {
    const one = { kind: 'x', body: { path: 'a', size: 3 }, seq: 1 };
    const two = { seq: 1, body: { size: 3, path: 'a' }, kind: 'x' };
    expect(canonicalJson(one)).toBe(canonicalJson(two));
  });
});
