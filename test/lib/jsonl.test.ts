import { describe, expect, it } from 'vitest';
import { parseJsonLines } from '../../src/lib/index.js';

describe('parseJsonLines', () => {
  it('parses every line and keeps its number and text', () => {
    const result = parseJsonLines('{"a":1}\n{"b":2}\n');
    expect(result.records).toEqual([
      { line: 1, value: { a: 1 }, text: '{"a":1}' },
      { line: 2, value: { b: 2 }, text: '{"b":2}' },
    ]);
    expect(result.unreadable).toEqual([]);
    expect(result.endsMidLine).toBe(false);
  });

  it('reports a torn final line instead of failing, and says the file ends mid-line', () => {
    const result = parseJsonLines('{"a":1}\n{"b":');
    expect(result.records).toHaveLength(1);
    expect(result.unreadable).toEqual([
      expect.objectContaining({ line: 2, offset: 8, text: '{"b":', isTorn: true }),
    ]);
    expect(result.endsMidLine).toBe(true);
  });

  it('reports a bad line in the middle as unreadable but not torn, and reads on', () => {
    const result = parseJsonLines('{"a":1}\nnot json\n{"c":3}\n');
    expect(result.records.map((record) => record.line)).toEqual([1, 3]);
    expect(result.unreadable).toEqual([expect.objectContaining({ line: 2, isTorn: false })]);
  });

  it('skips blank lines and reads empty content as nothing', () => {
    expect(parseJsonLines('').records).toEqual([]);
    expect(parseJsonLines('\n\n{"a":1}\n\n').records).toEqual([
      { line: 3, value: { a: 1 }, text: '{"a":1}' },
    ]);
  });

  it('counts byte offsets in UTF-8', () => {
    const result = parseJsonLines('{"é":1}\nbad');
    expect(result.unreadable[0]?.offset).toBe(Buffer.byteLength('{"é":1}\n'));
  });
});
