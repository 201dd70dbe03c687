// Closing `rewind ui` while the page's action runs: the action finishes, and its answer is sent,
// before the server is gone (the process exits next, and would cut it off midway).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { init, openSession, type Session } from '../../src/index.js';
import { type RunningUi, startUi } from '../../src/ui/server.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

let session: Session | undefined;
let ui: RunningUi | undefined;

afterEach(async () => {
  await ui?.close();
  await session?.close();
});

/** A workspace whose app.txt was broken since its checkpoint `base`, and its session (closed after). */
async function brokenSinceBase(): Promise<{ workspace: string; session: Session }> {
  const workspace = await makeTempDirectory();
  await writeFile(join(workspace, 'app.txt'), 'good\n');
  await init({ workspace });
  const opened = await openSession({ workspace });
  session = opened;
  await opened.checkpoint('base');
  await writeFile(join(workspace, 'app.txt'), 'broken\n');
  return { workspace, session: opened };
}

describe('rewind ui, closed while an action runs', () => {
  it("waits for the page's rollback to finish and answer before it closes", async () => {
    const { workspace, session } = await brokenSinceBase();
    ui = await startUi({ workspace, assets: join(ROOT, 'dist/ui-assets') });
    const base = ui.url.slice(0, ui.url.indexOf('/?'));
    // An agent's command holds the workspace lock: the page's rollback waits for it.
    const command = session.exec('sleep 1.5');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const answer = fetch(`${base}/api/action/rollback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ui.endpoint.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: { label: 'base' } }),
    });
    await expect.poll(() => ui?.running).toBe(1);
    await ui.close();
    // Closed only once the rollback was done, and its answer sent.
    expect(await readFile(join(workspace, 'app.txt'), 'utf8')).toBe('good\n');
    const response = await answer;
    expect(response.status).toBe(200);
    expect(((await response.json()) as { output: unknown }).output).toMatchObject({
      label: 'base',
      isDryRun: false,
    });
    expect(ui.running).toBe(0);
    await command;
  });

  it('rewind ui, interrupted while a rollback runs, says it waits, lets it finish, then exits 0', async () => {
    const { workspace, session } = await brokenSinceBase();
    const child = spawn(
      process.execPath,
      [join(ROOT, 'bin/rewind.cjs'), 'ui', '--root', workspace],
      {
        env: { ...process.env, REWIND_DAEMON: '0' },
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    const exited = once(child, 'exit');
    await expect.poll(() => stdout, { timeout: 10_000 }).toContain('?token=');
    const url = new URL((/http:\S+/.exec(stdout) as RegExpExecArray)[0]);
    const command = session.exec('sleep 3');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const answer = fetch(`${url.origin}/api/action/rollback`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${url.searchParams.get('token')}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ input: { label: 'base' } }),
    });
    // The request is in by then (the command holds the lock 3 s), waiting for the lock.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    child.kill('SIGINT');
    const [code] = await exited;
    expect(code).toBe(0);
    expect(stderr).toContain('rewind ui: waiting for what the page asked to finish (1 running)');
    expect(await readFile(join(workspace, 'app.txt'), 'utf8')).toBe('good\n');
    expect((await answer).status).toBe(200);
    await command;
  });
});
