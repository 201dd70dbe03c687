import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  Agent,
  type AgentInputItem,
  type Model,
  run,
  setTracingDisabled,
  Usage,
} from '@openai/agents';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  applyApprovals,
  RewindAgentsSession,
  rewindRun,
  rewindTool,
} from '../../src/adapters/openai-agents/index.js';
import { HaltError, log, type Session } from '../../src/index.js';
import { rewind } from '../helpers/cli.js';
import { sessionOn } from '../helpers/session.js';

setTracingDisabled(true);

let calls = 0;
const callOf = (name: string, args: Record<string, unknown>) => ({
  type: 'function_call' as const,
  callId: `call_${++calls}`,
  name,
  arguments: JSON.stringify(args),
  status: 'completed' as const,
});
const says = (text: string) => ({
  type: 'message' as const,
  role: 'assistant' as const,
  status: 'completed' as const,
  content: [{ type: 'output_text' as const, text }],
});

/** A model that answers from a script: each call gives the next output; what it was sent is kept. */
function scripted(steps: object[][]): Model & { seen: unknown[] } {
  const script = [...steps];
  const seen: unknown[] = [];
  return {
    seen,
    async getResponse(request) {
      seen.push(request.input);
      const output = script.shift();
      if (!output) throw new Error('the script ran out');
      return { usage: new Usage(), output: output as never, responseId: `r${seen.length}` };
    },
    // biome-ignore lint/correctness/useYield: a scripted model never streams.
    async *getStreamedResponse() {
      throw new Error('not streamed');
    },
  };
}

function toolsOf(session: Session, timeoutMs?: number) {
  return [
    rewindTool(session, {
      name: 'write_file',
      timeoutMs,
      description: 'Write a file',
      parameters: z.object({ path: z.string(), content: z.string() }),
      execute: async (input: unknown) => {
        const { path, content } = input as { path: string; content: string };
        await session.write(path, content);
        return `wrote ${path}`;
      },
    }),
    rewindTool(session, {
      name: 'run_tests',
      description: 'Run the tests',
      parameters: z.object({}),
      execute: async () => `tests ${(await session.check()).status}`,
    }),
    rewindTool(session, {
      name: 'deploy',
      description: 'Deploy',
      parameters: z.object({ target: z.string() }),
      needsApproval: true,
      execute: async (input: unknown) => {
        const { target } = input as { target: string };
        await session.write('DEPLOYED', target);
        return `deployed to ${target}`;
      },
    }),
  ];
}

const text = (workspace: string, path = 'a.txt') => readFile(join(workspace, path), 'utf8');

describe('rewind-agent/openai-agents', () => {
  it("keeps the SDK's memory in Rewind: a failed test rolls back files and items together, the request kept", async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v1' });
    session.autoRollback({
      verifier: {
        command: `grep -q broken a.txt && echo '{"status":"fail"}' || echo '{"status":"pass"}'`,
      },
    });
    const model = scripted([
      [callOf('write_file', { path: 'a.txt', content: 'v2' })],
      [callOf('run_tests', {})],
      [says('Done: v2.')],
      [callOf('write_file', { path: 'a.txt', content: 'broken' })],
      [callOf('run_tests', {})],
      [says('never asked: the run stops at the rollback')],
    ]);
    const agent = new Agent({ name: 'coder', model, tools: toolsOf(session) });
    const first = await rewindRun(session, agent, 'Write v2');
    expect(first.result?.finalOutput).toBe('Done: v2.');
    const memory = new RewindAgentsSession(session);
    const afterFirst = await memory.getItems();
    // The items recorded turn by turn during the run are the SDK's own at its end, once each.
    expect(afterFirst).toEqual(first.result?.history);
    expect(afterFirst[0]).toMatchObject({ role: 'user', content: 'Write v2' });
    expect(afterFirst.some((item) => item.type === 'function_call_result')).toBe(true);
    expect((await session.conversation())?.format).toBe('openai-agents');

    const second = await rewindRun(session, agent, 'Now break it');
    expect(second.result).toBeUndefined();
    expect(second.rolledBack).toMatchObject({ event: 'test-failure' });
    expect(await text(workspace)).toBe('v2');
    const restored = await memory.getItems();
    expect(restored.slice(0, afterFirst.length)).toEqual(afterFirst);
    expect(JSON.stringify(restored)).not.toContain('broken');
    const request = restored.find(
      (item) => (item as { content?: unknown }).content === 'Now break it',
    );
    expect(request).toMatchObject({ role: 'user' });
    expect(JSON.stringify(restored.at(-1))).toContain('rolled back to checkpoint');

    // The next run goes on from the restored items, which the SDK accepts.
    const third = await rewindRun(
      session,
      new Agent({ name: 'coder', model: scripted([[says('ok')]]), tools: toolsOf(session) }),
      'go on',
    );
    expect(third.result?.finalOutput).toBe('ok');
    // A person rolls back a whole run: files and items.
    await memory.rollback(first.checkpoint as string);
    expect(await text(workspace)).toBe('v1');
    // Back to no items, but for the latest request and the note that says what happened.
    const undone = await memory.getItems();
    expect(undone).toHaveLength(2);
    expect(undone[0]).toMatchObject({ role: 'user', content: 'go on' });
    expect(JSON.stringify(undone[1])).toContain('rolled back to checkpoint');
    // keepLast prunes the older run checkpoints: four runs, three kept.
    await rewindRun(
      session,
      new Agent({ name: 'coder', model: scripted([[says('fine')]]), tools: toolsOf(session) }),
      'and again',
      { keepLast: 3 },
    );
    const runs = (await session.checkpoints()).filter((c) => c.label.startsWith('run-'));
    expect(runs.map((c) => c.label)).not.toContain(first.checkpoint);
    expect(runs).toHaveLength(3);
  });

  it('maps needsApproval onto Rewind drafts: a person approves or discards with the CLI', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v1' });
    const model = scripted([
      [callOf('deploy', { target: 'staging' })],
      [says('Deployed to staging.')],
      [callOf('deploy', { target: 'production' })],
      [says('Not deployed.')],
    ]);
    const agent = new Agent({ name: 'deployer', model, tools: toolsOf(session) });
    const asked = await rewindRun(session, agent, 'Deploy to staging');
    expect(asked.result?.interruptions).toHaveLength(1);
    const drafts = (await session.actions()).filter((action) => action.state === 'draft');
    expect(drafts).toHaveLength(1);
    expect(drafts[0]).toMatchObject({ kind: 'x.deploy' });
    // Nobody decided yet: the run stays stopped.
    const result = asked.result as NonNullable<typeof asked.result>;
    expect(await applyApprovals(session, result)).toEqual({ approved: 0, rejected: 0, pending: 1 });
    expect((await rewind(workspace, ['approve', String(drafts[0]?.id), '--yes'])).code).toBe(0);
    expect(await applyApprovals(session, result)).toEqual({ approved: 1, rejected: 0, pending: 0 });
    const resumed = await rewindRun(session, agent, result.state, { checkpoint: false });
    expect(resumed.result?.finalOutput).toBe('Deployed to staging.');
    expect(await text(workspace, 'DEPLOYED')).toBe('staging');
    expect((await session.actions()).find((action) => action.id === drafts[0]?.id)?.state).toBe(
      'done',
    );

    const again = await rewindRun(session, agent, 'Deploy to production');
    const next = again.result as NonNullable<typeof again.result>;
    const draft = (await session.actions()).findLast((action) => action.state === 'draft');
    expect((await rewind(workspace, ['discard', String(draft?.id)])).code).toBe(0);
    expect(await applyApprovals(session, next)).toEqual({ approved: 0, rejected: 1, pending: 0 });
    const declined = await rewindRun(session, agent, next.state, { checkpoint: false });
    expect(declined.result?.finalOutput).toBe('Not deployed.');
    expect(await text(workspace, 'DEPLOYED')).toBe('staging');
  });

  it('hands a halt to the caller, not to the model', async () => {
    const { session } = await sessionOn({ 'a.txt': 'v1' });
    session.autoRollback({ verifier: { command: 'echo no verdict' } });
    const model = scripted([[callOf('run_tests', {})], [says('never asked')]]);
    const agent = new Agent({ name: 'coder', model, tools: toolsOf(session) });
    await expect(rewindRun(session, agent, 'test it')).rejects.toBeInstanceOf(HaltError);
    expect(model.seen).toHaveLength(1);
    const verdicts = (await log({ workspace: session.workspace, kind: 'escalation' })).entries;
    expect(verdicts.at(-1)?.entry.body).toMatchObject({ resolution: 'stop' });
    const items: AgentInputItem[] = await new RewindAgentsSession(session).getItems();
    expect(Array.isArray(items)).toBe(true);
  });

  it('refuses the calls made beside one that rolled back: files and items stay paired', async () => {
    const { workspace, session } = await sessionOn({ 'f.txt': 'v0' });
    session.autoRollback({ on: ['exception'] });
    const explode = rewindTool(session, {
      name: 'explode',
      description: 'Explode',
      parameters: z.object({}),
      execute: async () => {
        await session.write('half.txt', 'x');
        throw new Error('boom');
      },
    });
    const model = scripted([
      [callOf('write_file', { path: 'f.txt', content: 'v1' })],
      [says('ok')],
      [
        callOf('explode', {}),
        callOf('write_file', { path: 'f.txt', content: 'v2' }),
        callOf('write_file', { path: 'g.txt', content: 'g2' }),
      ],
      [says('never asked')],
    ]);
    const agent = new Agent({ name: 'coder', model, tools: [...toolsOf(session), explode] });
    const first = await rewindRun(session, agent, 'run one');
    expect(first.result?.finalOutput).toBe('ok');
    const second = await rewindRun(session, agent, 'run two');
    expect(second.rolledBack).toMatchObject({ event: 'exception', to: second.checkpoint });
    // Back to before the run, files and items alike: the siblings did not run after it.
    expect(await text(workspace, 'f.txt')).toBe('v1');
    await expect(text(workspace, 'g.txt')).rejects.toThrow();
    await expect(text(workspace, 'half.txt')).rejects.toThrow();
    const items = JSON.stringify(await new RewindAgentsSession(session).getItems());
    expect(items).not.toContain('v2');
    expect(items).toContain('rolled back because: boom');
  });

  // With a timeout, the SDK hands each call a signal of its own: the turn is not told by signals.
  it.each([
    ['', undefined],
    [' (tools with a timeout)', 10_000],
  ])(
    'rolls back to the start of the failing model turn, not of the run: earlier turns stay, files and items alike%s',
    async (_, timeoutMs) => {
      const { workspace, session } = await sessionOn({ 'f.txt': 'v0' });
      session.autoCheckpoint();
      session.autoRollback({ on: ['exception'] });
      const explode = rewindTool(session, {
        name: 'explode',
        timeoutMs,
        description: 'Explode',
        parameters: z.object({}),
        execute: async () => {
          await session.write('half.txt', 'x');
          throw new Error('boom');
        },
      });
      const model = scripted([
        [callOf('write_file', { path: 'a.txt', content: 'a' })],
        [callOf('write_file', { path: 'b.txt', content: 'b' })],
        [
          callOf('write_file', { path: 'c.txt', content: 'c' }),
          callOf('explode', {}),
          callOf('write_file', { path: 'd.txt', content: 'd' }),
        ],
        [says('never asked')],
      ]);
      const agent = new Agent({
        name: 'coder',
        model,
        tools: [...toolsOf(session, timeoutMs), explode],
      });
      const ran = await rewindRun(session, agent, 'write a, b, c, d');
      expect(model.seen).toHaveLength(3);
      // The checkpoint taken before the third turn's first call (write c.txt): the fourth of the
      // session (the run's own, then one before each call).
      const beforeTurn3 = (await session.checkpoints())[3];
      expect(beforeTurn3?.label).toMatch(/^auto-0003-write_file-/);
      expect(ran.result).toBeUndefined();
      expect(ran.rolledBack).toMatchObject({ event: 'exception', to: beforeTurn3?.label });
      // The first two turns' work is kept; the third turn's is undone, and the call after the
      // failing one never ran.
      expect(await text(workspace, 'a.txt')).toBe('a');
      expect(await text(workspace, 'b.txt')).toBe('b');
      for (const gone of ['c.txt', 'half.txt', 'd.txt']) {
        await expect(text(workspace, gone)).rejects.toThrow();
      }
      // The items say the same: the request, the first two turns' calls and results, the note.
      const items = await new RewindAgentsSession(session).getItems();
      const said = JSON.stringify(items);
      expect(items[0]).toMatchObject({ role: 'user', content: 'write a, b, c, d' });
      for (const kept of ['wrote a.txt', 'wrote b.txt']) expect(said).toContain(kept);
      for (const gone of ['c.txt', 'd.txt']) expect(said).not.toContain(gone);
      expect(JSON.stringify(items.at(-1))).toContain('rolled back because: boom');
      // The next run goes on from there: the model sees the first two turns.
      const next = scripted([[says('ok')]]);
      const again = await rewindRun(
        session,
        new Agent({ name: 'coder', model: next, tools: toolsOf(session) }),
        'go on',
      );
      expect(again.result?.finalOutput).toBe('ok');
      expect(JSON.stringify(next.seen[0])).toContain('wrote b.txt');
    },
  );

  it('in a plain run, rolls back the failing call alone and refuses every later call of the run', async () => {
    const { workspace, session } = await sessionOn({ 'f.txt': 'v0' });
    session.autoCheckpoint();
    session.autoRollback({ on: ['exception'] });
    const explode = rewindTool(session, {
      name: 'explode',
      description: 'Explode',
      parameters: z.object({}),
      execute: async () => {
        await session.write('half.txt', 'x');
        throw new Error('boom');
      },
    });
    const model = scripted([
      [callOf('write_file', { path: 'a.txt', content: 'a' })],
      [callOf('explode', {})],
      [callOf('write_file', { path: 'b.txt', content: 'b' })],
      [says('gave up')],
    ]);
    const agent = new Agent({ name: 'coder', model, tools: [...toolsOf(session), explode] });
    const result = await run(agent, 'write a and b', { session: new RewindAgentsSession(session) });
    expect(result.finalOutput).toBe('gave up');
    // Back to before the failing call: the first turn's file stays (the run's items still say
    // it was written), the failing call's is undone.
    expect(await text(workspace, 'a.txt')).toBe('a');
    await expect(text(workspace, 'half.txt')).rejects.toThrow();
    // After the rollback the run's later calls were refused: b.txt was never written.
    await expect(text(workspace, 'b.txt')).rejects.toThrow();
    const lastInput = JSON.stringify(model.seen.at(-1));
    expect(lastInput).toContain('Rewind did not run this call: an earlier call of this run failed');
    const items = JSON.stringify(await new RewindAgentsSession(session).getItems());
    expect(items).toContain('wrote a.txt');
    expect(items).toContain('Rewind did not run this call');
  });
});
