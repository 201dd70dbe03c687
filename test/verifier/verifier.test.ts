import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { log } from '../../src/session/index.js';
import {
  formatVerification,
  parseVerdict,
  runVerifier,
  type VerifierOutput,
} from '../../src/verifier/index.js';
import { rewind } from '../helpers/cli.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';

const out = (stdout: string, extra: Partial<VerifierOutput> = {}): VerifierOutput => ({
  stdout,
  stderr: '',
  exitCode: 0,
  timedOut: false,
  ...extra,
});

describe('parseVerdict', () => {
  it('reads pass and fail from the JSON on stdout; the exit code never decides', () => {
    expect(
      parseVerdict(out('{"status":"pass","summary":"3 tests passed"}', { exitCode: 1 })),
    ).toMatchObject({
      status: 'pass',
      summary: '3 tests passed',
    });
    expect(parseVerdict(out('{"status":"fail","errors":["e1","e2"]}'))).toMatchObject({
      status: 'fail',
      errors: ['e1', 'e2'],
    });
    expect(parseVerdict(out('running 12 tests...\n{"status":"pass"}\n')).status).toBe('pass');
  });

  it.each([
    ['no JSON', out('all good!'), 'no JSON verdict'],
    ['a JSON array', out('[{"status":"pass"}]'), 'not an object'],
    ['several objects', out('{"status":"pass"}\n{"status":"fail"}'), '2 JSON objects'],
    ['an unknown status', out('{"status":"green"}'), 'not pass, fail or unknown'],
    ['a timeout', out('{"status":"pass"}', { timedOut: true }), 'did not finish in time'],
    ['megabytes of output', out(`${'x'.repeat(5_000_000)}\n`), 'no JSON verdict'],
  ])('is unknown for %s, saying why', (_name, output, note) => {
    const verdict = parseVerdict(output);
    expect(verdict.status).toBe('unknown');
    expect(verdict.notes).toContain(note);
  });
});

describe('runVerifier', () => {
  it('retries unknown verdicts and stops at the first pass (seed behaviour 7)', async () => {
    const outputs = ['not json', 'still not', '{"status":"pass"}'];
    const result = await runVerifier({ command: 'x', retries: 3, retryDelayMs: 1 }, async () =>
      out(outputs.shift() ?? ''),
    );
    expect(result.status).toBe('pass');
    expect(result.attempts.map((attempt) => attempt.status)).toEqual([
      'unknown',
      'unknown',
      'pass',
    ]);
    expect(formatVerification(result)).toBe('Verification passed.');
  });

  it('never retries a fail, and an unknown that survives its retries stays unknown', async () => {
    let calls = 0;
    const fail = await runVerifier({ command: 'x', retries: 3, retryDelayMs: 1 }, async () => {
      calls += 1;
      return out('{"status":"fail"}');
    });
    expect([fail.status, calls]).toEqual(['fail', 1]);
    const unknown = await runVerifier({ command: 'x', retries: 2, retryDelayMs: 1 }, async () =>
      out('??'),
    );
    expect([unknown.status, unknown.attempts.length]).toEqual(['unknown', 3]);
  });
});

describe('formatVerification (seed behaviours 34-38)', () => {
  it('puts verdicts in words', () => {
    const verdict = { summary: undefined, errors: [], notes: undefined };
    expect(formatVerification({ ...verdict, status: 'pass', summary: '3 tests passed' })).toBe(
      '3 tests passed',
    );
    expect(formatVerification({ ...verdict, status: 'pass' })).toBe('Verification passed.');
    expect(formatVerification({ ...verdict, status: 'fail', errors: ['e1', 'e2'] })).toBe(
      'Failed:\n  - e1\n  - e2',
    );
    expect(
      formatVerification({
        ...verdict,
        status: 'fail',
        summary: 'Tests failed',
        errors: ['assertion failed'],
      }),
    ).toBe('Tests failed:\n  - assertion failed');
    expect(formatVerification({ ...verdict, status: 'fail' })).toBe('Verification failed');
    expect(formatVerification({ ...verdict, status: 'unknown', notes: 'no JSON' })).toBe('no JSON');
  });
});

describe('session.test and rewind test', () => {
  it('runs the verifier in the workspace, journals the verdict with its evidence', async () => {
    const { workspace, session } = await sessionOn({ 'ok.flag': '' });
    const result = await session.test({
      verifier: {
        command:
          'test -e ok.flag && echo \'{"status":"pass","summary":"flag found"}\' || echo \'{"status":"fail","errors":["no flag"]}\'',
      },
    });
    expect(result).toMatchObject({ status: 'pass', summary: 'flag found' });
    const entry = (await log({ workspace })).entries.at(-1);
    expect(entry).toMatchObject({
      kind: 'verification-recorded',
      entry: { body: { status: 'pass', summary: 'flag found' } },
    });
    await expect(session.test()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await session.close();
  });

  it('exits 0 on pass, 1 on fail, 3 on unknown, with the verifier from .rewind/config.json or the flag', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await writeFile(
      join(cwd, '.rewind', 'config.json'),
      JSON.stringify({
        verifier: {
          command:
            'echo \'{"status":"fail","summary":"Tests failed","errors":["assertion failed"]}\'',
        },
      }),
    );
    const failed = await rewind(cwd, ['test']);
    expect(failed).toMatchObject({
      code: 1,
      stdout: 'FAIL: Tests failed:\n  - assertion failed\n',
    });
    expect(await rewind(cwd, ['test', '--verifier', 'echo \'{"status":"pass"}\''])).toMatchObject({
      code: 0,
      stdout: 'PASS: Verification passed.\n',
    });
    const unknown = await rewind(cwd, [
      'test',
      '--verifier',
      'sleep 5',
      '--timeout',
      '0.3',
      '--retries',
      '1',
    ]);
    expect(unknown.code).toBe(3);
    expect(unknown.stdout).toContain('did not finish in time');
    expect((await rewind(cwd, ['log'])).stdout).toMatch(/verification unknown after 2 attempts/);
  });
});
