import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  escalationFor,
  gc,
  HaltError,
  log,
  openSession,
  promptEscalation,
  startIsolatedSession,
  stopEscalation,
} from '../../src/session/index.js';
import { sessionOn } from '../helpers/session.js';
import { lay } from '../helpers/workspace.js';

const PASS = `echo '{"status":"pass","summary":"3 tests passed"}'`;
const FAIL = `echo '{"status":"fail","summary":"Tests failed","errors":["assertion failed"]}'`;
const UNKNOWN = 'echo not json';

const read = (workspace: string, path: string) => readFile(join(workspace, path), 'utf8');

async function kinds(workspace: string): Promise<string[]> {
  return (await log({ workspace })).entries.map((line) => line.kind);
}

describe('auto-checkpoint', () => {
  it('checkpoints before every wrapped tool call and really prunes beyond keepLast (seed 2, fixed)', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    session.autoCheckpoint({ keepLast: 2 });
    const edit = session.tool(
      async (text: string) => {
        await session.write('a.txt', text);
        return 'ok';
      },
      { name: 'edit file' },
    );
    for (const text of ['b', 'c', 'd']) expect(await edit(text)).toBe('ok');
    const automatic = (await session.checkpoints()).filter((checkpoint) => checkpoint.isAutomatic);
    expect(automatic).toHaveLength(2);
    expect(automatic[0]?.label).toMatch(/^auto-0002-edit_file-\d+$/);
    expect((await kinds(workspace)).filter((kind) => kind === 'checkpoint-pruned')).toHaveLength(1);
    expect(() => session.autoCheckpoint({ keepLast: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });
});

describe('injected clock and ids', () => {
  it('label automatic checkpoints with the session clock and name isolated sessions with generateId', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    await session.close();
    const at = Date.UTC(2026, 10, 30, 12, 0, 0);
    const clocked = await openSession({ workspace, now: () => new Date(at) });
    clocked.autoCheckpoint();
    await clocked.tool(async () => 'ok', { name: 'noop' })();
    expect((await clocked.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual([
      `auto-0001-noop-${at}`,
    ]);
    await clocked.close();
    const isolated = await startIsolatedSession({ workspace, generateId: () => 'isolated1' });
    expect(isolated.id).toBe('isolated1');
    await isolated.close();
  });
});

describe('pruned automatic checkpoints', () => {
  it('stop keeping their objects alive: gc reclaims what only they held', async () => {
    const { workspace, session, store } = await sessionOn({ 'a.txt': 'first' });
    session.autoCheckpoint({ keepLast: 1 });
    const overwrite = session.tool(async (text: string) => {
      await lay(workspace, { 'a.txt': text });
      return text;
    });
    await overwrite('second');
    // The checkpoint taken before this call holds the only copy of "second".
    await overwrite('third');
    const onlyInFirst = (await session.checkpoints())[0]?.tree;
    await overwrite('fourth');
    await overwrite('fifth');
    expect((await session.checkpoints()).map((checkpoint) => checkpoint.tree)).not.toContain(
      onlyInFirst,
    );
    const report = await gc({ workspace, graceMs: 0 });
    expect(report.removed.map((object) => object.digest)).toContain(onlyInFirst);
    expect(await store.has(onlyInFirst as never)).toBe(false);
  });
});

describe('auto-rollback and escalation', () => {
  it('rolls back to the newest checkpoint when the verifier fails, and says so (seed 17, 40)', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
    await session.checkpoint('good', {
      messages: [{ role: 'user', content: 'fix it' }],
      format: 'anthropic',
    });
    session.autoRollback({ on: ['test-failure'], verifier: { command: FAIL } });
    await lay(workspace, { 'a.txt': 'broken' });
    const failure = await session.check().catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: 'VERIFICATION_FAILED' });
    expect((failure as Error).message).toContain('Tests failed:\n  - assertion failed');
    expect((failure as Error).message).toContain('[REWIND]');
    expect(session.lastAutoRollback).toMatchObject({
      event: 'test-failure',
      to: 'good',
      isSkipped: false,
    });
    expect(session.lastAutoRollback?.messages?.at(-1)).toMatchObject({ role: 'user' });
    const tail = (await kinds(workspace)).slice(-3);
    expect(tail).toEqual(['verification-recorded', 'rollback-started', 'rollback-completed']);
    // Nothing changed since: a second failure skips the rollback and journals the skip (seed 31-33,
    // fixed); lastAutoRollback keeps the rollback that changed something, and what it restored.
    const restored = session.lastAutoRollback;
    await expect(session.check()).rejects.toMatchObject({ code: 'VERIFICATION_FAILED' });
    expect(session.lastAutoRollback).toBe(restored);
    // The files at "good" have now failed too: no checkpoint is left that is not broken.
    expect((await log({ workspace })).entries.at(-1)?.entry.body).toMatchObject({
      label: 'latest',
      reason: 'every checkpoint holds files a verifier failed',
    });
    // The ledger is never rolled back, and filters by kind and by checkpoint.
    const verifications = await log({ workspace, kind: 'verification' });
    expect(verifications.entries.map((line) => line.entry.body.status)).toEqual(['fail', 'fail']);
    const aboutGood = await log({ workspace, checkpoint: 'good' });
    expect(aboutGood.entries.map((line) => line.kind)).toEqual([
      'checkpoint-created',
      'rollback-started',
    ]);
  });

  it('goes back by default to the newest checkpoint a verifier passed, never one holding the failing files', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v1' });
    await session.checkpoint('one');
    session.autoCheckpoint();
    session.autoRollback({
      verifier: {
        command: 'grep -q v3 a.txt && echo \'{"status":"fail"}\' || echo \'{"status":"pass"}\'',
      },
    });
    const edit = session.tool(
      async (text: string) => {
        await session.write('a.txt', text);
        return 'edited';
      },
      { name: 'edit' },
    );
    // A run_tests tool: the checkpoint taken before it already holds whatever the tests judge.
    const runTests = session.tool(async () => `tests: ${(await session.check()).status}`, {
      name: 'run_tests',
    });
    expect(await edit('v2')).toBe('edited');
    expect(await runTests()).toBe('tests: pass');
    expect(await edit('v3')).toBe('edited');
    const said = await runTests();
    expect(said).toMatch(/^ERROR: Tests failed.*\[REWIND\] .*checkpoint "auto-0003-edit-/s);
    expect(await read(workspace, 'a.txt')).toBe('v2');
    expect(session.lastAutoRollback).toMatchObject({
      event: 'test-failure',
      to: expect.stringMatching(/^auto-0003-edit-/),
      isSkipped: false,
    });
    // Without a passing verdict, it goes to the newest checkpoint that does not hold the failure.
    const fresh = await sessionOn({ 'a.txt': 'v1' });
    await fresh.session.checkpoint('before');
    fresh.session.autoCheckpoint();
    fresh.session.autoRollback({ verifier: { command: FAIL } });
    const freshEdit = fresh.session.tool(
      async () => {
        await fresh.session.write('a.txt', 'bad');
        return 'edited';
      },
      { name: 'edit' },
    );
    const freshTests = fresh.session.tool(() => fresh.session.check(), { name: 'run_tests' });
    await freshEdit();
    expect(await freshTests()).toMatch(/\[REWIND\] .*checkpoint "auto-0001-edit-/s);
    expect(await read(fresh.workspace, 'a.txt')).toBe('v1');
    // A label the policy names is taken as it is.
    fresh.session.autoRollback({ to: 'before', verifier: { command: FAIL } });
    await fresh.session.write('a.txt', 'worse');
    await expect(fresh.session.check()).rejects.toMatchObject({ code: 'VERIFICATION_FAILED' });
    expect(fresh.session.lastAutoRollback).toMatchObject({ to: 'before' });
  });

  it('keeps the checkpoint a verifier passed when pruning, whatever keepLast says', async () => {
    const { session } = await sessionOn({ 'a.txt': 'v1' });
    session.autoCheckpoint({ keepLast: 1 });
    session.autoRollback({ verifier: { command: PASS } });
    const edit = session.tool((text: string) => session.write('a.txt', text), { name: 'edit' });
    await edit('v2');
    await session.check();
    await edit('v3');
    await edit('v4');
    const labels = (await session.checkpoints()).map((checkpoint) => checkpoint.label);
    expect(labels).toEqual([
      expect.stringMatching(/^auto-0002-edit-/),
      expect.stringMatching(/^auto-0003-edit-/),
    ]);
    expect((await session.prune({ keepLast: 1, dryRun: true })).pruned).toEqual([]);
  });

  it('passes without rolling back (seed 16, 39)', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ verifier: { command: PASS } });
    expect(await session.check()).toMatchObject({ status: 'pass', summary: '3 tests passed' });
    expect(session.lastAutoRollback).toBeUndefined();
    expect((await kinds(workspace)).at(-1)).toBe('verification-recorded');
  });

  it.each([
    ['continue', 'VERIFICATION_UNKNOWN', false],
    ['rollback', 'VERIFICATION_UNKNOWN', true],
  ] as const)(
    'resolves an unknown verdict with %s (seed 8, 9, 18)',
    async (resolution, code, isRolledBack) => {
      const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
      await session.checkpoint('good');
      session.autoRollback({
        verifier: { command: UNKNOWN, retries: 1, retryDelayMs: 1 },
        escalation: () => resolution,
      });
      await lay(workspace, { 'a.txt': 'changed' });
      await expect(session.check()).rejects.toMatchObject({ code });
      const all = await kinds(workspace);
      expect(all).toContain('escalation-resolved');
      expect(all.includes('rollback-completed')).toBe(isRolledBack);
      if (isRolledBack)
        expect(session.lastAutoRollback).toMatchObject({ event: 'escalation', to: 'good' });
      await session.close();
    },
  );

  it('stops by default on an unknown verdict: a halt with the checkpoint and the last result (seed 10)', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ verifier: { command: UNKNOWN } });
    const halt = await session.check().catch((error: unknown) => error);
    expect(halt).toBeInstanceOf(HaltError);
    // Nothing was ever verified: the halt names no checkpoint as known-good (never "latest").
    expect(halt).toMatchObject({ checkpoint: undefined, lastResult: { status: 'unknown' } });
    expect((halt as HaltError).message).toContain('no checkpoint was verified as good yet');
    // Once a verifier passed the files of "good", that is the known-good point the halt names.
    session.autoRollback({ verifier: { command: `echo '{"status":"pass"}'` } });
    await session.check();
    session.autoRollback({ verifier: { command: UNKNOWN } });
    const named = await session.check().catch((error: unknown) => error);
    expect(named).toMatchObject({ checkpoint: 'good' });
    expect((named as HaltError).message).toContain(
      'checkpoint "good" is the last known-good point',
    );
    expect((await kinds(workspace)).at(-1)).toBe('escalation-resolved');
    // An escalation handler that throws stops too, and the ledger says why.
    session.autoRollback({
      verifier: { command: UNKNOWN },
      escalation: () => {
        throw new Error('no terminal');
      },
    });
    await expect(session.check()).rejects.toBeInstanceOf(HaltError);
    expect((await log({ workspace })).entries.at(-1)?.entry.body).toMatchObject({
      resolution: 'stop',
      error: 'no terminal',
    });
  });
});

describe('a failing command', () => {
  it('throws from run(), after rolling back with the exception policy; inside a tool the wrapper decides', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
    await session.checkpoint('good');
    session.autoRollback({ on: ['exception'] });
    const failure = await session
      .run('echo bad > a.txt; echo broken >&2; exit 2')
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: 'COMMAND_FAILED', data: { exitCode: 2 } });
    expect((failure as Error).message).toMatch(/Command failed \(exit 2\).*\nbroken\n\[REWIND\]/s);
    expect(session.lastAutoRollback).toMatchObject({ event: 'exception', to: 'good' });
    expect((await session.run('echo fine')).stdout).toBe('fine\n');
    session.lastAutoRollback = undefined;
    const readOnly = session.tool(() => session.run('cat missing.txt'), { rollbackOnError: false });
    expect(await readOnly()).toMatch(/^ERROR: Command failed \(exit 1\): cat missing.txt/);
    expect(session.lastAutoRollback).toBeUndefined();
    expect(
      (await log({ workspace })).entries.filter((line) => line.kind === 'rollback-started'),
    ).toHaveLength(1);
  });
});

describe('escalation handlers', () => {
  it('asks in interactive mode and stops in agent mode (seed 19-21)', async () => {
    const context = {
      result: {
        status: 'unknown' as const,
        summary: undefined,
        errors: [],
        notes: 'no JSON',
        attempts: [],
      },
      checkpoint: 'good',
    };
    const questions: string[] = [];
    const ask = (answer: string) => async (question: string) => {
      questions.push(question);
      return answer;
    };
    expect(await promptEscalation(ask('r'))(context)).toBe('rollback');
    expect(await promptEscalation(ask('continue'))(context)).toBe('continue');
    expect(await promptEscalation(ask('what?'))(context)).toBe('stop');
    expect(questions[0]).toContain('[r]oll back to good');
    expect(escalationFor('agent')).toBe(stopEscalation);
    // No terminal in a test run: interactive mode cannot ask, so it stops too.
    expect(await escalationFor('interactive')(context)).toBe('stop');
    expect(() => escalationFor('robot' as never)).toThrow(
      expect.objectContaining({ message: expect.stringContaining('mode must be one of') }),
    );
  });
});

describe('the tool wrapper', () => {
  it('turns failures into ERROR: strings, after rolling back with a [REWIND] notice (seed 26, 29, 30)', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
    await session.checkpoint('good');
    session.autoRollback({ on: ['exception'] });
    const plain = session.tool(
      () => {
        throw new Error('something broke');
      },
      { rollbackOnError: false },
    );
    expect(await plain()).toBe('ERROR: something broke');
    expect(session.lastAutoRollback).toBeUndefined();
    const breaking = session.tool(async () => {
      await session.write('a.txt', 'bad');
      throw new Error('something broke');
    });
    const said = await breaking();
    expect(said).toMatch(/^ERROR: something broke\n\[REWIND\] .*checkpoint "good"/);
    expect(session.lastAutoRollback).toMatchObject({ event: 'exception', to: 'good' });
    expect(
      (await log({ workspace })).entries.some((line) => line.kind === 'rollback-completed'),
    ).toBe(true);
  });

  it('lets a halt through, and with no checkpoint just reports the error (seed 4, 27)', async () => {
    const { session } = await sessionOn({});
    session.autoRollback({ on: ['exception'] });
    const failing = session.tool(() => {
      throw new Error('no checkpoint yet');
    });
    expect(await failing()).toBe('ERROR: no checkpoint yet');
    expect(session.lastAutoRollback).toBeUndefined();
    const halting = session.tool(() => {
      throw new HaltError('good', {
        status: 'unknown',
        summary: undefined,
        errors: [],
        notes: 'x',
        attempts: [],
      });
    });
    await expect(halting()).rejects.toBeInstanceOf(HaltError);
  });

  it('runs parallel tool calls one at a time, each after its own checkpoint', async () => {
    const { session } = await sessionOn({});
    session.autoCheckpoint();
    const order: string[] = [];
    const slow = session.tool(async (name: string) => {
      order.push(`start ${name}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      order.push(`end ${name}`);
      return name;
    });
    expect(await Promise.all([slow('a'), slow('b'), slow('c')])).toEqual(['a', 'b', 'c']);
    expect(order).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    expect(
      (await session.checkpoints()).filter((checkpoint) => checkpoint.isAutomatic),
    ).toHaveLength(3);
  });
});
