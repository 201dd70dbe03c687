import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/processes.js';

describe('examples/ai-sdk', () => {
  it('runs a real generateText loop offline: a failed test rolls back files and conversation, the next turn goes on', async () => {
    const example = pathToFileURL(join(ROOT, 'examples', 'ai-sdk', 'run.mjs')).href;
    const { runAiSdkAgent } = (await import(example)) as {
      runAiSdkAgent: (options: {
        say: (text: string) => void;
      }) => Promise<{ workspace: string; messages: { role: string }[] }>;
    };
    const said: string[] = [];
    const { workspace, messages } = await runAiSdkAgent({ say: (text) => said.push(text) });
    expect(said.join('\n')).toContain('[REWIND] The workspace and conversation were rolled back');
    expect(readFileSync(join(workspace, 'src/math.js'), 'utf8')).toContain(
      'times = (a, b) => a * b',
    );
    expect(messages.at(-1)).toMatchObject({ role: 'assistant' });
  }, 60_000);
});

describe('examples/langgraph and examples/db-migration', () => {
  it("time-travels a LangGraph agent's files with its state, and lets a halt out", async () => {
    const example = pathToFileURL(join(ROOT, 'examples', 'langgraph', 'run.mjs')).href;
    const { runLangGraphAgent } = (await import(example)) as {
      runLangGraphAgent: (options: {
        say: (text: string) => void;
      }) => Promise<{ workspace: string }>;
    };
    const said: string[] = [];
    const { workspace } = await runLangGraphAgent({ say: (text) => said.push(text) });
    expect(readFileSync(join(workspace, 'greeting.txt'), 'utf8')).toBe('hello, world\n');
    expect(said.join('\n')).toContain('halt: Stopped');
  }, 60_000);

  it('migrates a SQLite database, fails verification, forks back with the patch note and passes', async () => {
    const example = pathToFileURL(join(ROOT, 'examples', 'db-migration', 'run.mjs')).href;
    const { runDbMigration } = (await import(example)) as {
      runDbMigration: (options: { say: (text: string) => void }) => Promise<{ workspace: string }>;
    };
    const said: string[] = [];
    await runDbMigration({ say: (text) => said.push(text) });
    const story = said.join('\n');
    expect(story).toContain('run_tests: FAIL');
    expect(story).toContain('user 6: balance 50.00, expected 75.00');
    expect(story).toContain('run_tests: PASS');
    expect(story).toContain(
      'balances: 2.00, 4.95, 10.00, 25.00, 49.90, 75.00, 120.00, 0.60, 36.50, 149.85',
    );
  }, 60_000);
});

describe('examples/openai-agents', () => {
  it("keeps the Agents SDK's memory in Rewind, rolls back on a failed test, and waits for a person's approval", async () => {
    const example = pathToFileURL(join(ROOT, 'examples', 'openai-agents', 'run.mjs')).href;
    const { runOpenAiAgent } = (await import(example)) as {
      runOpenAiAgent: (options: { say: (text: string) => void }) => Promise<{ workspace: string }>;
    };
    const said: string[] = [];
    const { workspace } = await runOpenAiAgent({ say: (text) => said.push(text) });
    expect(readFileSync(join(workspace, 'PUBLISHED'), 'utf8')).toBe('1.1.0\n');
    expect(said.join('\n')).toMatch(/publish waits as draft #\d+/);
  }, 60_000);
});
