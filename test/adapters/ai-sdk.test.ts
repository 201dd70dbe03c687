import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LanguageModelV3GenerateResult } from '@ai-sdk/provider';
import { generateText, type ModelMessage, stepCountIs, type ToolSet, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { rewindTools, rewindTurn, type TurnControls } from '../../src/adapters/ai-sdk/index.js';
import { HaltError, type Session } from '../../src/index.js';
import { sessionOn } from '../helpers/session.js';

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** A model step that calls tools. */
const calls = (...list: [string, Record<string, unknown>][]): LanguageModelV3GenerateResult => ({
  content: list.map(([toolName, input], index) => ({
    type: 'tool-call' as const,
    toolCallId: `call-${toolName}-${index}-${Math.random().toString(36).slice(2, 8)}`,
    toolName,
    input: JSON.stringify(input),
  })),
  finishReason: { unified: 'tool-calls', raw: undefined },
  usage,
  warnings: [],
});

/** A model step that answers in words and ends the turn. */
const says = (text: string): LanguageModelV3GenerateResult => ({
  content: [{ type: 'text', text }],
  finishReason: { unified: 'stop', raw: undefined },
  usage,
  warnings: [],
});

/** A scripted model: each call gives the next step; what it was sent is kept. */
function scripted(steps: LanguageModelV3GenerateResult[]) {
  const script = [...steps];
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const next = script.shift();
      if (!next) throw new Error('the script ran out');
      return next;
    },
  });
}

const VERIFIER = `grep -q broken src/math.js && echo '{"status":"fail","errors":["mul is broken"]}' || echo '{"status":"pass"}'`;

function toolsOf(session: Session) {
  return rewindTools(
    session,
    {
      read_file: tool({
        description: 'Read a file',
        inputSchema: z.object({ path: z.string() }),
        execute: async ({ path }) => readFile(join(session.workspace, path), 'utf8'),
      }),
      write_file: tool({
        description: 'Write a file',
        inputSchema: z.object({ path: z.string(), content: z.string() }),
        execute: async ({ path, content }) => {
          await session.write(path, content);
          return `wrote ${path}`;
        },
      }),
      run_tests: tool({
        description: 'Run the tests',
        inputSchema: z.object({}),
        execute: async () => `tests: ${(await session.check()).status}`,
      }),
    },
    { readOnly: ['read_file'] },
  );
}

const run =
  (model: MockLanguageModelV3, tools: ToolSet) =>
  ({ messages, stopWhen }: TurnControls) =>
    generateText({ model, tools, messages, stopWhen: [stepCountIs(8), stopWhen] });

describe('rewind-agent/ai-sdk', () => {
  it('journals the tools of a real generateText loop; a failed test rolls back files and conversation, keeps the request, and the next turn goes on from there', async () => {
    const { workspace, session } = await sessionOn({
      'src/math.js': 'export const add = (a, b) => a + b;\n',
    });
    session.autoRollback({ verifier: { command: VERIFIER } });
    const tools = toolsOf(session);
    const good = 'export const add = (a, b) => a + b;\nexport const mul = (a, b) => a * b;\n';
    const model = scripted([
      calls(['read_file', { path: 'src/math.js' }]),
      calls(['write_file', { path: 'src/math.js', content: good }]),
      calls(['run_tests', {}]),
      says('Added mul.'),
      // Turn 2: a bad edit, then the tests.
      calls(['write_file', { path: 'src/math.js', content: 'broken\n' }]),
      calls(['run_tests', {}]),
      says('this step must never be asked for'),
    ]);
    let messages: ModelMessage[] = [{ role: 'user', content: 'Add mul to src/math.js' }];
    const first = await rewindTurn(session, messages, run(model, tools));
    expect(first.rolledBack).toBeUndefined();
    expect(first.messages.at(-1)).toMatchObject({ role: 'assistant' });
    messages = [...first.messages, { role: 'user', content: 'Now rename mul to times' }];

    const second = await rewindTurn(session, messages, run(model, tools));
    // The loop stopped after the failing step: the model was not asked again.
    expect(second.result.steps).toHaveLength(2);
    expect(JSON.stringify(second.result.steps[1]?.content)).toContain('[REWIND]');
    expect(second.rolledBack).toMatchObject({ event: 'test-failure', isSkipped: false });
    // Back to the files the verifier passed, and the conversation with them, the request at its end.
    expect(await readFile(join(workspace, 'src/math.js'), 'utf8')).toBe(good);
    const restored = second.messages;
    expect(restored.slice(0, first.messages.length)).toEqual(first.messages);
    const last = restored.at(-1) as { role: string; content: { text: string }[] };
    expect(last.role).toBe('user');
    expect(last.content[0]?.text).toBe('Now rename mul to times');
    expect(last.content[1]?.text).toContain('rolled back to checkpoint');

    // The AI SDK takes the restored history as it is, and the agent goes on.
    const retry = scripted([calls(['run_tests', {}]), says('All good now.')]);
    const third = await rewindTurn(session, restored, run(retry, tools));
    expect(third.rolledBack).toBeUndefined();
    expect(third.result.text).toBe('All good now.');
    const turns = (await session.checkpoints()).filter((checkpoint) =>
      checkpoint.label.startsWith('turn-'),
    );
    expect(turns).toHaveLength(3);
    expect(turns[1]?.conversation).toEqual({ format: 'ai-sdk', messageCount: messages.length });
  });

  it('ends the loop on a halt and throws it to the caller; no later tool call runs', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    session.autoRollback({ verifier: { command: 'echo not json' } });
    const tools = toolsOf(session);
    // The model asks for the tests and, in the same step, a write: the halt refuses the write.
    const model = scripted([
      calls(['run_tests', {}], ['write_file', { path: 'a.txt', content: 'after the halt' }]),
      says('this step must never be asked for'),
    ]);
    const turn = rewindTurn(session, [{ role: 'user', content: 'go' }], run(model, tools));
    await expect(turn).rejects.toBeInstanceOf(HaltError);
    expect(model.doGenerateCalls).toHaveLength(1);
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('a');
    // The next turn starts clean.
    const next = await rewindTurn(
      session,
      [{ role: 'user', content: 'go on' }],
      run(scripted([says('ok')]), tools),
    );
    expect(next.result.text).toBe('ok');
  });

  it('checkpoints before each call that can change something, with the conversation the model sent', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    const tools = toolsOf(session);
    const image = new Uint8Array([137, 80, 78, 71, 0, 1, 2, 255]);
    const model = scripted([
      calls(['read_file', { path: 'a.txt' }]),
      calls(['write_file', { path: 'a.txt', content: 'b' }]),
      says('done'),
    ]);
    const asked: ModelMessage[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this picture? Then write b.' },
          { type: 'image', image, mediaType: 'image/png' },
        ],
      },
    ];
    await rewindTurn(session, asked, run(model, tools), { label: 'asked' });
    const automatic = (await session.checkpoints()).filter((checkpoint) => checkpoint.isAutomatic);
    // One for the write; none for the read.
    expect(automatic).toHaveLength(1);
    expect(automatic[0]?.label).toMatch(/^auto-\d+-write_file-/);
    const paired = await session.conversationAt(automatic[0]?.label as string);
    expect(paired?.messages[0]).toMatchObject({ role: 'user' });
    const part = ((paired?.messages[0]?.content ?? []) as { image?: unknown }[])[1];
    expect(part?.image).toBeInstanceOf(Uint8Array);
    expect(Array.from(part?.image as Uint8Array)).toEqual(Array.from(image));
    // Undoing the turn: roll back to the checkpoint taken before it.
    await writeFile(join(workspace, 'note.txt'), 'a person was here');
    await session.rollback('asked');
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('a');
  });

  it('once a call of a step rolled back, its sibling calls are refused and the files match the restored conversation', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'A0' });
    session.autoRollback({});
    const tools = rewindTools(session, {
      write_file: tool({
        description: 'Write a file',
        inputSchema: z.object({ path: z.string(), content: z.string() }),
        execute: async ({ path, content }) => {
          await session.write(path, content);
          return `wrote ${path}`;
        },
      }),
      deploy: tool({
        description: 'Deploy',
        inputSchema: z.object({}),
        execute: async (): Promise<string> => {
          await session.write('half.txt', 'x');
          throw new Error('deploy exploded');
        },
      }),
    });
    const present = (path: string) =>
      readFile(join(workspace, path), 'utf8').catch(() => undefined);
    // The failing call first: the writes the model asked for beside it never run.
    const model = scripted([
      calls(
        ['deploy', {}],
        ['write_file', { path: 'a.txt', content: 'A-after' }],
        ['write_file', { path: 'new.txt', content: 'N' }],
      ),
    ]);
    const first = await rewindTurn(session, [{ role: 'user', content: 'go' }], run(model, tools));
    expect(first.rolledBack).toMatchObject({ event: 'exception', isSkipped: false });
    expect(await present('a.txt')).toBe('A0');
    expect(await present('new.txt')).toBeUndefined();
    expect(await present('half.txt')).toBeUndefined();
    const outputs = JSON.stringify(first.result.steps[0]?.content);
    expect(outputs).toContain('Rewind did not run this call');
    const note = JSON.stringify(first.messages.at(-1));
    expect(note).toContain('rolled back because: deploy exploded');
    expect(note).not.toContain('Patch applied');

    // A write, then the failing call, in one step: back to before the step, not to the
    // checkpoint between them (which holds the write but a conversation without it).
    const messages: ModelMessage[] = [...first.messages, { role: 'user', content: 'again' }];
    const second = await rewindTurn(
      session,
      messages,
      run(
        scripted([calls(['write_file', { path: 'a.txt', content: 'A2' }], ['deploy', {}])]),
        tools,
      ),
    );
    expect(second.rolledBack).toMatchObject({ event: 'exception', isSkipped: false });
    expect(await present('a.txt')).toBe('A0');
    const target = (await session.checkpoints()).find(
      (checkpoint) => checkpoint.label === second.rolledBack?.to,
    );
    expect(target?.conversation).toEqual({ format: 'ai-sdk', messageCount: messages.length });
    expect(JSON.stringify(second.messages)).not.toContain('A2');
  });

  it('journals a streaming tool (an async generator): its values stream, its last is the result', async () => {
    const { workspace, session } = await sessionOn({});
    session.autoRollback({});
    const tools = rewindTools(session, {
      build: tool({
        description: 'Build',
        inputSchema: z.object({}),
        async *execute() {
          yield { status: 'building' as const };
          await session.write('out.txt', 'built');
          yield { status: 'done' as const };
        },
      }),
    });
    const model = scripted([calls(['build', {}]), says('ok')]);
    const turn = await rewindTurn(
      session,
      [{ role: 'user', content: 'build' }],
      ({ messages, stopWhen }) =>
        generateText({ model, tools, messages, stopWhen: [stepCountIs(4), stopWhen] }),
    );
    const results = turn.result.steps[0]?.content.filter((part) => part.type === 'tool-result');
    expect(results?.map((part) => part.output)).toEqual([{ status: 'done' }]);
    expect(await readFile(join(workspace, 'out.txt'), 'utf8')).toBe('built');
    expect((await session.actions()).some((action) => action.target === 'out.txt')).toBe(true);
  });

  it('names a real, verified checkpoint in a halt, never "latest"; the calls after it never run', async () => {
    const { session } = await sessionOn({ 'a.txt': 'a' });
    session.autoRollback({ verifier: { command: 'echo not json' } });
    const tools = toolsOf(session);
    // A write, the tests (no verdict: a halt), and a write the halt must refuse. The calls
    // start at once; which one reached the session's queue first used to vary from run to run
    // (their conversation syncs raced), so the turn is tried several times.
    for (let attempt = 0; attempt < 6; attempt++) {
      const model = scripted([
        calls(
          ['write_file', { path: 'a.txt', content: `b${attempt}` }],
          ['run_tests', {}],
          ['write_file', { path: `c${attempt}.txt`, content: 'after the halt' }],
        ),
      ]);
      const turn = rewindTurn(
        session,
        [{ role: 'user', content: `go ${attempt}` }],
        run(model, tools),
      );
      const halt = await turn.catch((error: unknown) => error);
      expect(halt).toBeInstanceOf(HaltError);
      // No checkpoint was ever verified good: the halt says so instead of naming one.
      expect((halt as HaltError).checkpoint).toBeUndefined();
      expect((halt as HaltError).message).toContain('no checkpoint was verified');
      expect((halt as HaltError).message).not.toContain('latest');
      // The calls ran in the model's order: the one after the halt did not run.
      await expect(readFile(join(session.workspace, `c${attempt}.txt`), 'utf8')).rejects.toThrow();
    }
  });
});
