import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/processes.js';

describe('examples/refactor-rescue', () => {
  it('rescues a refactor done through the real MCP server: undo restores, refuses to trample, a draft is discarded', async () => {
    const example = pathToFileURL(join(ROOT, 'examples', 'refactor-rescue', 'run.mjs')).href;
    const { runRefactorRescue } = (await import(example)) as {
      runRefactorRescue: (options: {
        say: (text: string) => void;
      }) => Promise<{ workspace: string }>;
    };
    const said: string[] = [];
    const { workspace } = await runRefactorRescue({ say: (text) => said.push(text) });
    expect(existsSync(join(workspace, 'lib/legacy/format.js'))).toBe(true);
    expect(existsSync(join(workspace, 'DEPLOYED'))).toBe(false);
    expect(said.join('\n')).toContain('Refused to undo');
  }, 60_000);
});
