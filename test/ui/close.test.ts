// Closing `rewind ui` while the page's action runs: the action finishes, and its answer is sent,
// before the server is gone (the process exits next, and would cut it off midway).
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

describe('rewind ui, closed while an action runs', () => {
  it("waits for the page's rollback to finish and answer before it closes", async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(workspace, 'app.txt'), 'good\n');
    await init({ workspace });
    session = await openSession({ workspace });
    await session.checkpoint('base');
    await writeFile(join(workspace, 'app.txt'), 'broken\n');
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
});
