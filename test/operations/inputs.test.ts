import { describe, expect, it } from 'vitest';
import { parseDuration, parseSize } from '../../src/operations/index.js';

describe('durations and sizes written for people', () => {
  it('reads a duration as a number and a unit, in milliseconds', () => {
    expect(parseDuration('30m')).toBe(30 * 60 * 1000);
    expect(parseDuration('12h')).toBe(12 * 60 * 60 * 1000);
    expect(parseDuration('7d')).toBe(7 * 24 * 60 * 60 * 1000);
    expect(parseDuration('2w')).toBe(14 * 24 * 60 * 60 * 1000);
    expect(parseDuration('1.5d')).toBe(36 * 60 * 60 * 1000);
    expect(parseDuration(' 45s ')).toBe(45_000);
  });

  it('refuses a duration without a unit, with another unit, or negative', () => {
    for (const text of ['30', '3x', '1y', '-1d', 'd', '', '1 d 2h', '7D']) {
      expect(parseDuration(text), text).toBeUndefined();
    }
  });

  it('reads a size in bytes: KB, MB, GB in powers of 1000, K, KiB, M, MiB... in powers of 1024', () => {
    expect(parseSize('1048576')).toBe(1_048_576);
    expect(parseSize('12B')).toBe(12);
    expect(parseSize('500MB')).toBe(500_000_000);
    expect(parseSize('500mb')).toBe(500_000_000);
    expect(parseSize('2GiB')).toBe(2 * 1024 ** 3);
    expect(parseSize('1.5G')).toBe(1.5 * 1024 ** 3);
    expect(parseSize('64k')).toBe(64 * 1024);
    expect(parseSize('1 TB')).toBe(1000 ** 4);
  });

  it('refuses a size with an unknown unit, or that is not a number', () => {
    for (const text of ['lots', '5XB', '-1MB', '1e3', 'MB', '', '1.5.2G', 'unlimited']) {
      expect(parseSize(text), text).toBeUndefined();
    }
  });
});
