// The 40 acceptance behaviours of the first seed (../shared/reference/rewind-sdk-behaviour.md §5),
// renamed to our API. Where the seed's behaviour was a bug (§6), the test pins the fix and its
// name says "fixed".
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type Message, validate } from '../../src/conversation/index.js';
import {
  escalationFor,
  HaltError,
  init,
  log,
  openSession,
  type Session,
  stopEscalation,
  withIsolatedSession,
} from '../../src/session/index.js';
import { formatVerification, parseVerdict } from '../../src/verifier/index.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const verdict = (json: object): string => `echo '${JSON.stringify(json)}'`;
const PASS = verdict({ status: 'pass', summary: '3 tests passed' });
const FAIL = verdict({ status: 'fail', summary: 'Tests failed', errors: ['assertion failed'] });
const UNKNOWN = 'echo not json';
/** A verifier that answers from a script of outputs, one per run (a file counts the runs). */
const scripted = (outputs: string[]): string =>
  `n=$(cat .runs 2>/dev/null || echo 0); echo $((n+1)) > .runs; case $n in ${outputs
    .map((output, index) => `${index}) echo '${output}';;`)
    .join(' ')} *) echo '${outputs.at(-1)}';; esac`;

const user = (content: string): Message => ({ role: 'user', content });
const assistant = (content: string): Message => ({ role: 'assistant', content });
const call = (id: string): Message => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name: 'exec', arguments: '{}' } }],
});
const reply = (id: string): Message => ({ role: 'tool', tool_call_id: id, content: `ran ${id}` });

async function kinds(workspace: string): Promise<string[]> {
  return (await log({ workspace })).entries.map((line) => line.kind);
}

async function failing(session: Session): Promise<unknown> {
  return session.check().then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe('seed behaviours: conversation and session', () => {
  it('1 syncConversation records the messages; conversation() returns them as given', async () => {
    const { session } = await sessionOn({});
    const messages = [user('hi'), assistant('hello')];
    await session.syncConversation(messages);
    expect((await session.conversation())?.messages).toEqual(messages);
  });

  it('2 auto-checkpoints keep the last 2 of 3; a failing verifier rolls back to the newest one, with the conversation and a note', async () => {
    const { session } = await sessionOn({ 'a.txt': 'a' });
    session.autoCheckpoint({ keepLast: 2 });
    session.autoRollback({ to: 'latest', verifier: { command: FAIL } });
    const step = session.tool(async (text: string) => session.write('a.txt', text));
    await session.syncConversation([user('go'), call('c1')]);
    await step('b');
    await step('c');
    await session.syncConversation([user('go'), call('c1'), reply('c1'), assistant('broke it')]);
    await step('d');
    expect(
      (await session.checkpoints()).filter((checkpoint) => checkpoint.isAutomatic),
    ).toHaveLength(2);
    await expect(session.check()).rejects.toMatchObject({ code: 'VERIFICATION_FAILED' });
    expect(session.lastAutoRollback?.event).toBe('test-failure');
    const messages = session.lastAutoRollback?.messages ?? [];
    expect(messages.slice(0, 4)).toEqual([
      user('go'),
      call('c1'),
      reply('c1'),
      assistant('broke it'),
    ]);
    expect(messages[4]).toMatchObject({
      role: 'system',
      content: expect.stringContaining('rolled back'),
    });
  });

  it('3 a rollback restores the file and the conversation, and the patch note reaches the model', async () => {
    const { workspace, session } = await sessionOn({ 'seed.txt': 'seed\n' });
    await session.write('data.txt', 'good data\n');
    expect(await readFile(join(session.workspace, 'data.txt'), 'utf8')).toBe('good data\n');
    await session.checkpoint('stable', { messages: [user('a'), assistant('b'), user('c')] });
    await session.write('data.txt', 'bad data\n');
    await session.syncConversation([
      user('a'),
      assistant('b'),
      user('c'),
      assistant('bad data'),
      user('?'),
    ]);
    const rolled = await session.rollback('stable', { patchNote: 'fixed the parser' });
    expect(await readFile(join(workspace, 'data.txt'), 'utf8')).toBe('good data\n');
    const messages = rolled.conversation?.messages ?? [];
    // The question asked since stays at the end (issue 15), followed by the note.
    expect(messages).toHaveLength(5);
    expect(messages[3]).toEqual(user('?'));
    expect(JSON.stringify(messages)).not.toContain('bad data');
    expect(JSON.stringify(messages.at(-1))).toContain('fixed the parser');
  });

  it('4 with no checkpoint yet, a failing tool reports its error and nothing rolls back (fixed: the skip is journaled)', async () => {
    const { workspace, session } = await sessionOn({});
    session.autoRollback({ on: ['exception'] });
    const broken = session.tool(() => {
      throw new Error('command failed');
    });
    expect(await broken()).toBe('ERROR: command failed');
    expect(session.lastAutoRollback).toBeUndefined();
    expect((await kinds(workspace)).at(-1)).toBe('rollback-skipped');
  });

  it('5 two dangling calls before the checkpoint are both dealt with (fixed: answered, not truncated away)', async () => {
    const { session } = await sessionOn({});
    await session.checkpoint('cp', { messages: [user('go'), call('c1'), call('c2')] });
    const restored = await session.conversationAt('cp');
    const messages = restored?.messages ?? [];
    expect(validate(messages, 'openai-chat').problems).toEqual([]);
    expect(restored?.answered.map((answered) => answered.id)).toEqual(['c1', 'c2']);
  });

  it('6 a resolved call survives; the trailing unresolved call is answered (fixed: nothing resolved is trimmed)', async () => {
    const { session } = await sessionOn({});
    await session.checkpoint('cp', { messages: [user('go'), call('c1'), reply('c1'), call('c2')] });
    const messages = (await session.conversationAt('cp'))?.messages ?? [];
    expect(messages.slice(0, 4)).toEqual([user('go'), call('c1'), reply('c1'), call('c2')]);
    expect(messages[4]).toMatchObject({ role: 'tool', tool_call_id: 'c2' });
  });
});

describe('seed behaviours: verification and escalation', () => {
  it('7 unknown, unknown, pass with 3 retries passes: no rollback, one verification entry', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    const command = scripted(['nope', 'nope', '{"status":"pass"}']);
    session.autoRollback({ verifier: { command, retries: 3, retryDelayMs: 1 } });
    expect(formatVerification(await session.check())).toBe('Verification passed.');
    expect((await kinds(workspace)).filter((kind) => kind.startsWith('verification'))).toHaveLength(
      1,
    );
    expect(session.lastAutoRollback).toBeUndefined();
  });

  it.each([
    ['8 continue', 'continue', 'VERIFICATION_UNKNOWN', false],
    ['9 rollback', 'rollback', 'VERIFICATION_UNKNOWN', true],
  ] as const)(
    '%s: an unknown after its retries is resolved that way',
    async (_name, resolution, code, rolls) => {
      const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
      await session.checkpoint('good');
      session.autoRollback({
        to: 'good',
        verifier: { command: UNKNOWN, retries: 1, retryDelayMs: 1 },
        escalation: () => resolution,
      });
      await lay(session.workspace, { 'a.txt': 'bad' });
      expect(await failing(session)).toMatchObject({ code });
      expect((await log({ workspace, kind: 'escalation' })).entries[0]?.entry.body).toMatchObject({
        resolution,
      });
      expect((await kinds(workspace)).includes('rollback-completed')).toBe(rolls);
      // Fixed: the event says an escalation caused it, not a test failure.
      if (rolls)
        expect(session.lastAutoRollback).toMatchObject({ event: 'escalation', to: 'good' });
      await session.close();
    },
  );

  it('10 stop raises a halt with the checkpoint and the last result; nothing rolls back', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({
      to: 'good',
      verifier: { command: UNKNOWN },
      escalation: stopEscalation,
    });
    const halt = await failing(session);
    expect(halt).toBeInstanceOf(HaltError);
    expect(halt).toMatchObject({ checkpoint: 'good', lastResult: { status: 'unknown' } });
    expect(await kinds(workspace)).not.toContain('rollback-started');
  });

  it('11 the ledger survives a rollback (fixed: the rollback itself is journaled too)', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ verifier: { command: UNKNOWN }, escalation: () => 'continue' });
    await failing(session);
    await session.rollback('good');
    const all = await kinds(workspace);
    expect(all).toContain('escalation-resolved');
    expect(all.slice(-2)).toEqual(['rollback-started', 'rollback-completed']);
  });

  it('12 check() uses the verifier given to autoRollback', async () => {
    const { session } = await sessionOn({});
    session.autoRollback({
      verifier: { command: verdict({ status: 'pass', summary: 'from the policy' }) },
    });
    expect((await session.check()).summary).toBe('from the policy');
  });

  it('13 {"status":"pass"} is a pass', () => {
    expect(
      parseVerdict({ stdout: '{"status":"pass"}', stderr: '', exitCode: 0, timedOut: false })
        .status,
    ).toBe('pass');
  });

  it('14 a fail passes its errors through', () => {
    expect(
      parseVerdict({
        stdout: '{"status":"fail","errors":["e"]}',
        stderr: '',
        exitCode: 1,
        timedOut: false,
      }),
    ).toMatchObject({
      status: 'fail',
      errors: ['e'],
    });
  });

  it('15 output that is not JSON is unknown, with a note; the raw output is kept as evidence', async () => {
    const { workspace, session } = await sessionOn({});
    const result = await session.test({ verifier: { command: 'echo garbage; echo oops >&2' } });
    expect(result).toMatchObject({
      status: 'unknown',
      notes: expect.stringContaining('no JSON verdict'),
    });
    expect(result.attempts[0]).toMatchObject({ stdout: 'garbage\n', stderr: 'oops\n' });
    const evidence = (await log({ workspace })).entries.at(-1)?.entry.body.evidence as {
      stdout: { sizeBytes: number };
    };
    expect(evidence.stdout.sizeBytes).toBe(8);
  });

  it('15 a verifier whose command holds a NUL byte is refused, saying so, before anything runs', async () => {
    const { workspace, session } = await sessionOn({});
    const before = (await log({ workspace })).entries.length;
    for (const command of ['echo a\0b', ['echo', 'a\0b']]) {
      await expect(session.test({ verifier: { command } })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('NUL byte'),
      });
    }
    expect((await log({ workspace })).entries).toHaveLength(before);
  });

  it('16 a pass returns its words and rolls nothing back', async () => {
    const { session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ verifier: { command: PASS } });
    expect(formatVerification(await session.check())).toBe('3 tests passed');
    expect(session.lastAutoRollback).toBeUndefined();
  });

  it('17 a fail (whatever the exit code) rolls back to the checkpoint: a verification entry, then the rollback', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
    await session.checkpoint('good');
    session.autoRollback({ to: 'good', verifier: { command: `${FAIL}; exit 0` } });
    await lay(session.workspace, { 'a.txt': 'bad' });
    expect(await failing(session)).toMatchObject({ code: 'VERIFICATION_FAILED' });
    expect((await kinds(workspace)).slice(-3)).toEqual([
      'verification-recorded',
      'rollback-started',
      'rollback-completed',
    ]);
    expect(session.lastAutoRollback).toMatchObject({ event: 'test-failure', to: 'good' });
  });

  it('18 non-JSON output with continue: an error, no rollback, one escalation entry', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ verifier: { command: UNKNOWN }, escalation: () => 'continue' });
    expect(await failing(session)).toMatchObject({ code: 'VERIFICATION_UNKNOWN' });
    expect((await kinds(workspace)).filter((kind) => kind === 'escalation-resolved')).toHaveLength(
      1,
    );
  });

  it('19 agent mode stops', () => {
    expect(escalationFor('agent')).toBe(stopEscalation);
  });

  it('20 interactive mode asks (a terminal prompt when there is a terminal)', () => {
    expect(escalationFor('interactive')).toBeTypeOf('function');
  });

  it('21 an invalid mode is refused', () => {
    expect(() => escalationFor('batch' as never)).toThrow(/mode must be one of/);
  });
});

describe('seed behaviours: isolated sessions ending with a halt', () => {
  const halt = () =>
    new HaltError('good', {
      status: 'unknown',
      summary: undefined,
      errors: [],
      notes: 'x',
      attempts: [],
    });

  it('22 a halt in agent mode keeps the session, even with destroyOnExit', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    let id = '';
    await expect(
      withIsolatedSession({ workspace, destroyOnExit: true, mode: 'agent' }, async (session) => {
        id = session.id;
        throw halt();
      }),
    ).rejects.toBeInstanceOf(HaltError);
    expect((await openSession({ workspace, session: id })).isolation).toBe('isolated');
  });

  it('23 a halt in interactive mode destroys the session when nothing would be lost (fixed: never drops uncommitted work)', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    let id = '';
    await expect(
      withIsolatedSession(
        { workspace, destroyOnExit: true, mode: 'interactive' },
        async (session) => {
          id = session.id;
          throw halt();
        },
      ),
    ).rejects.toBeInstanceOf(HaltError);
    await expect(openSession({ workspace, session: id })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
  });

  it('24 a halt skips the auto-commit', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'one' });
    await init({ workspace });
    await expect(
      withIsolatedSession({ workspace, autoCommit: true }, async (session) => {
        await session.write('a.txt', 'two');
        throw halt();
      }),
    ).rejects.toBeInstanceOf(HaltError);
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('one');
  });
});

describe('seed behaviours: the tool wrapper and the no-op guard', () => {
  it('25 a wrapped tool call makes exactly one checkpoint', async () => {
    const { session } = await sessionOn({});
    session.autoCheckpoint();
    await session.tool(() => 'ok')();
    expect(await session.checkpoints()).toHaveLength(1);
  });

  it('26 an error becomes exactly "ERROR: something broke"', async () => {
    const { session } = await sessionOn({});
    expect(
      await session.tool(() => {
        throw new Error('something broke');
      })(),
    ).toBe('ERROR: something broke');
  });

  it('27 a halt raised in a tool propagates', async () => {
    const { session } = await sessionOn({});
    const tool = session.tool(() => {
      throw new HaltError('good', {
        status: 'unknown',
        summary: undefined,
        errors: [],
        notes: 'x',
        attempts: [],
      });
    });
    await expect(tool()).rejects.toBeInstanceOf(HaltError);
  });

  it('28 rollbackOnError: false rolls nothing back', async () => {
    const { session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ on: ['exception'] });
    await session.tool(
      () => {
        throw new Error('x');
      },
      { rollbackOnError: false },
    )();
    expect(session.lastAutoRollback).toBeUndefined();
  });

  it('29 a failing tool rolls back to the checkpoint even at the head, when something changed', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
    await session.checkpoint('good');
    session.autoRollback({ on: ['exception'], to: 'good' });
    await session.tool(async () => {
      await session.write('a.txt', 'bad');
      throw new Error('x');
    })();
    expect(session.lastAutoRollback).toMatchObject({
      event: 'exception',
      to: 'good',
      isSkipped: false,
    });
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('good');
  });

  it('30 the error string starts with ERROR: and has a [REWIND] notice naming the checkpoint', async () => {
    const { session } = await sessionOn({ 'a.txt': 'good' });
    await session.checkpoint('good');
    session.autoRollback({ on: ['exception'] });
    const said = await session.tool(async () => {
      await session.write('a.txt', 'bad');
      throw new Error('x');
    })();
    expect(said).toMatch(/^ERROR: x\n\[REWIND\] .*"good"/);
  });

  it('31 a rollback to the head that would change nothing is skipped and journaled once; the error still comes', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ to: 'good', verifier: { command: FAIL } });
    expect(await failing(session)).toMatchObject({ code: 'VERIFICATION_FAILED' });
    // Only a rollback that changed something is kept (issue 15): the skip is in the ledger.
    expect(session.lastAutoRollback).toBeUndefined();
    expect((await kinds(workspace)).filter((kind) => kind === 'rollback-skipped')).toHaveLength(1);
  });

  it('32 a second rollback to the same point with nothing changed since is skipped', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'good' });
    await session.checkpoint('good');
    session.autoRollback({ to: 'good', verifier: { command: FAIL } });
    await lay(session.workspace, { 'a.txt': 'bad' });
    await failing(session);
    await failing(session);
    expect((await kinds(workspace)).filter((kind) => kind === 'rollback-started')).toHaveLength(1);
  });

  it('33 the skip is one rollback-skipped entry naming the checkpoint', async () => {
    const { workspace, session } = await sessionOn({});
    await session.checkpoint('good');
    session.autoRollback({ to: 'good', verifier: { command: FAIL } });
    await failing(session);
    const skips = (await log({ workspace, kind: 'rollback-skipped' })).entries;
    expect(skips.map((line) => line.entry.body.label)).toEqual(['good']);
  });
});

describe('seed behaviours: verdicts in words', () => {
  const base = { summary: undefined, errors: [] as string[], notes: undefined };
  it('34 a pass with a summary gives the summary', () => {
    expect(formatVerification({ ...base, status: 'pass', summary: 'all good' })).toBe('all good');
  });
  it('35 a pass without one gives "Verification passed."', () => {
    expect(formatVerification({ ...base, status: 'pass' })).toBe('Verification passed.');
  });
  it('36 a fail lists its errors', () => {
    expect(formatVerification({ ...base, status: 'fail', errors: ['e1', 'e2'] })).toBe(
      'Failed:\n  - e1\n  - e2',
    );
  });
  it('37 an empty fail gives "Verification failed"', () => {
    expect(formatVerification({ ...base, status: 'fail' })).toBe('Verification failed');
  });
  it('38 an unknown gives its notes', () => {
    expect(formatVerification({ ...base, status: 'unknown', notes: 'why' })).toBe('why');
  });
  it('39 check() on a pass returns the words, no JSON', async () => {
    const { session } = await sessionOn({});
    session.autoRollback({ verifier: { command: PASS } });
    expect(formatVerification(await session.check())).toBe('3 tests passed');
  });
  it('40 check() on a fail throws, and the words are "Tests failed:" and the errors', async () => {
    const { session } = await sessionOn({});
    session.autoRollback({ verifier: { command: FAIL } });
    const error = (await failing(session)) as Error;
    expect(error.message).toContain('Tests failed:\n  - assertion failed');
  });
});
