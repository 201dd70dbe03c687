import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describeEntry, readLedgerFile } from '../../src/ledger/index.js';
import { runProcess } from '../../src/sandbox/index.js';
import { parseVerdict, runVerifier, type Verdict } from '../../src/verifier/index.js';
import {
  adversarialJsonText,
  hostileObjectText,
  hostileValueText,
  mutated,
  outcomeOf,
  RUNS,
  randomBytes,
  withinBound,
} from '../helpers/fuzz.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';

const VERDICT_FIELDS = ['status', 'summary', 'errors', 'notes'];

/** What real verifiers print: a bare verdict, one after other output, one with errors. */
const SEEDS = [
  '{"status":"pass"}\n',
  '{"status":"fail","summary":"2 of 10 failed","errors":["a.test.ts: expected 1","b.test.ts: timeout"]}\n',
  'running 10 tests\n..........\n{"status":"unknown","notes":"flaky runner"}\n',
  '{\n  "status": "pass",\n  "summary": "all good"\n}\n',
].map((text) => Buffer.from(text));

/** A verifier's stdout: damaged verdicts, random bytes, any JSON, verdicts of the wrong types. */
const stdout = fc.oneof(
  { weight: 3, arbitrary: mutated(SEEDS).map((bytes) => bytes.toString('utf8')) },
  { weight: 1, arbitrary: randomBytes().map((bytes) => bytes.toString('utf8')) },
  { weight: 2, arbitrary: adversarialJsonText(VERDICT_FIELDS) },
  { weight: 2, arbitrary: hostileObjectText(VERDICT_FIELDS) },
  {
    weight: 2,
    arbitrary: fc
      .record({
        status: fc.oneof(fc.constantFrom('"pass"', '"fail"', '"unknown"'), hostileValueText),
        errors: fc.oneof(
          fc.array(hostileValueText, { maxLength: 3 }).map((items) => `[${items}]`),
          hostileValueText,
        ),
        before: fc.constantFrom('', 'noise\n', '{"status":"pass"}\n'),
      })
      .map(({ status, errors, before }) => `${before}{"status":${status},"errors":${errors}}\n`),
  },
);

function expectVerdict(verdict: Verdict): void {
  expect(['pass', 'fail', 'unknown']).toContain(verdict.status);
  expect(Array.isArray(verdict.errors)).toBe(true);
  for (const error of verdict.errors) expect(typeof error).toBe('string');
  if (verdict.summary !== undefined) expect(typeof verdict.summary).toBe('string');
  if (verdict.notes !== undefined) expect(typeof verdict.notes).toBe('string');
}

describe('fuzzing the verifier', () => {
  it('parseVerdict reads any stdout as a verdict, unknown with a reason when it holds none', async () => {
    await fc.assert(
      fc.asyncProperty(
        stdout,
        fc.option(fc.integer({ min: -1, max: 255 }), { nil: null }),
        fc.boolean(),
        async (text, exitCode, timedOut) => {
          const verdict = await withinBound(() =>
            parseVerdict({ stdout: text, stderr: '', exitCode, timedOut }),
          );
          expectVerdict(verdict);
          if (timedOut) expect(verdict.status).toBe('unknown');
        },
      ),
      { numRuns: RUNS.quick },
    );
  });

  it('runVerifier reads a real command printing any bytes as a verdict, retrying an unknown one', async () => {
    const directory = await makeTempDirectory();
    let round = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          stdout.map((text) => Buffer.from(text)),
          randomBytes(),
        ),
        async (bytes) => {
          round += 1;
          const file = join(directory, `stdout-${round}`);
          await writeFile(file, bytes);
          const result = await withinBound(() =>
            runVerifier(
              { command: ['cat', file], retries: 1, retryDelayMs: 0 },
              async (command, timeoutMs) => {
                const run = await runProcess(command, { cwd: directory, timeoutMs });
                return {
                  stdout: run.stdout.toString('utf8'),
                  stderr: run.stderr.toString('utf8'),
                  exitCode: run.exitCode,
                  timedOut: run.timedOut,
                };
              },
            ),
          );
          expectVerdict(result);
          expect(result.attempts).toHaveLength(result.status === 'unknown' ? 2 : 1);
        },
      ),
      { numRuns: RUNS.slow },
    );
  });

  it('a session journals the verdict of a verifier printing any bytes, and its log describes it', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    let round = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          stdout.map((text) => Buffer.from(text)),
          randomBytes(),
        ),
        async (bytes) => {
          round += 1;
          const file = join(workspace, `stdout-${round}`);
          await writeFile(file, bytes);
          const tested = await outcomeOf(() =>
            session.test({ verifier: { command: ['cat', file] } }),
          );
          if (tested.isThrown) throw tested.error;
          expectVerdict(tested.value);
        },
      ),
      { numRuns: RUNS.slow },
    );
    const sessions = join(workspace, '.rewind', 'sessions');
    for (const name of (await readdir(sessions)).filter((name) => name.endsWith('.jsonl'))) {
      const { entries } = await readLedgerFile(join(sessions, name));
      for (const entry of entries) expect(typeof describeEntry(entry)).toBe('string');
    }
  });
});

describe('what fuzzing the verifier found', () => {
  const out = (stdout: string) => ({ stdout, stderr: '', exitCode: 1, timedOut: false });

  it('keeps an error that is not a string as its JSON, one that String() cannot convert included', () => {
    const verdict = parseVerdict(
      out('{"status":"fail","errors":[{"toString":1},{"file":"a.ts","line":3},"plain",7]}'),
    );
    expect(verdict).toMatchObject({
      status: 'fail',
      errors: ['{"toString":1}', '{"file":"a.ts","line":3}', 'plain', '7'],
    });
  });

  it('reads a status nested too deep to write out as unknown, saying what it is', () => {
    const deep = `${'['.repeat(20_000)}0${']'.repeat(20_000)}`;
    const verdict = parseVerdict(out(`{"status":${deep}}`));
    expect(verdict.status).toBe('unknown');
    expect(verdict.notes).toContain('a list nested too deep to show');
  });
});
