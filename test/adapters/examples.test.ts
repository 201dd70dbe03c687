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
