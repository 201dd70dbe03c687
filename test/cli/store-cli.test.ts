import { describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const sessionsOf = async (cwd: string) =>
  JSON.parse((await rewind(cwd, ['--json', 'session', 'list'])).stdout) as {
    currentSession: string;
    sessions: { id: string; isCurrent: boolean; isHashChained: boolean }[];
  };

describe('rewind store commands', () => {
  it('starts sessions on a store, lists them and switches the current one', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, { 'a.txt': 'a' });
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'base']);
    const first = (await sessionsOf(cwd)).currentSession;

    const started = await rewind(cwd, ['session', 'new', '--hash-chain']);
    expect(started.stdout).toMatch(
      /^Started session (\w+) \(hash-chained, no sandbox\); it is now the current session\.\n$/,
    );
    const second = (await sessionsOf(cwd)).currentSession;
    expect(second).not.toBe(first);
    expect((await rewind(cwd, ['checkpoints'])).stdout).toContain('No checkpoints yet');

    const aside = await rewind(cwd, ['session', 'new', '--no-switch']);
    expect(aside.stdout).toContain('the current session is unchanged (`rewind session use ');
    const listed = await sessionsOf(cwd);
    expect(listed.currentSession).toBe(second);
    expect(listed.sessions).toHaveLength(3);
    expect(listed.sessions.find((session) => session.id === second)?.isHashChained).toBe(true);
    const lines = (await rewind(cwd, ['session', 'list'])).stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines.filter((line) => line.startsWith('  * '))).toEqual([
      expect.stringContaining(second),
    ]);

    const used = await rewind(cwd, ['session', 'use', first.slice(0, 4)]);
    expect(used.stdout).toBe(
      `The current session is now ${first} (no hash chain, no sandbox): 2 entries.\n`,
    );
    expect((await rewind(cwd, ['checkpoints'])).stdout).toContain('base');
    expect(await rewind(cwd, ['session', 'use', 'nosuch'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[SESSION_NOT_FOUND]'),
    });
    expect((await sessionsOf(cwd)).currentSession).toBe(first);
  });

  it('refuses to switch to an isolated session whose view was destroyed', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const first = (await sessionsOf(cwd)).currentSession;
    const { isolatedSession } = JSON.parse(
      (await rewind(cwd, ['--json', 'init', '--isolated'])).stdout,
    );
    expect((await rewind(cwd, ['destroy'])).code).toBe(0);
    await rewind(cwd, ['session', 'use', first]);
    expect(await rewind(cwd, ['session', 'use', isolatedSession])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('its view is gone'),
    });
    expect((await sessionsOf(cwd)).currentSession).toBe(first);
  });
});
