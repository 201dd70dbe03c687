import { describe, expect, it } from 'vitest';
import { describeError, errorDocument } from '../../src/cli/errors.js';
import { presentFailure } from '../../src/mcp/present.js';

/** A system error as Node throws it. */
function systemError(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${message}, open '/w/.rewind/sessions/s.jsonl'`), {
    code,
    errno: -1,
    syscall: 'open',
    path: '/w/.rewind/sessions/s.jsonl',
  });
}

describe('a system error that reaches an edge', () => {
  it.each([
    ['ENOSPC', 'no space left on device', 'The disk is full'],
    ['EIO', 'i/o error', 'input/output error'],
    ['EACCES', 'permission denied', 'Permission was denied'],
    ['EROFS', 'read-only file system', 'read-only'],
  ])(
    '%s is IO_FAILED, says what it means, and that the next command finishes what was cut short',
    (code, message, meaning) => {
      const error = systemError(code, message);
      const text = describeError(error, false);
      expect(text).toMatch(/^rewind: .*\[IO_FAILED\]\n$/s);
      expect(text).toContain(meaning);
      expect(text).toContain(message);
      expect(text).toContain('the next command finishes or closes anything left half-done');
      // Not the old advice, wrong for a full disk: check the path and its permissions.
      if (code !== 'EACCES') expect(text).not.toContain('permissions');
      expect(errorDocument(error)).toMatchObject({
        error: { code: 'IO_FAILED', data: { errno: code, path: '/w/.rewind/sessions/s.jsonl' } },
      });
      expect(presentFailure(error)).toMatchObject({ isError: true });
      expect(JSON.stringify(presentFailure(error))).toContain('[IO_FAILED]');
    },
  );

  it('anything else is still unexpected', () => {
    expect(describeError(new Error('boom'), false)).toContain('unexpected error: boom');
    expect(errorDocument(new Error('boom'))).toEqual({
      error: { code: 'UNEXPECTED', message: 'boom' },
    });
  });
});
