// The web timeline in a real browser: Debian's chromium driven by playwright-core, over a
// session scripted with the library, in a real git repository.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { init, openSession, type Session, startIsolatedSession } from '../../src/index.js';
import { type RunningUi, startUi } from '../../src/ui/server.js';
import { git } from '../helpers/git.js';
import { ROOT } from '../helpers/processes.js';

const CHROMIUM = process.env.REWIND_CHROMIUM ?? '/usr/bin/chromium';
/** Where the main views' screenshots go when asked for (docs/images, by `npm run screenshots`). */
const SCREENSHOTS = process.env.REWIND_UI_SCREENSHOTS;

let workspace: string;
let session: Session;
let ui: RunningUi;
let browser: Browser;
let page: Page;
let service: Server;
const ids: Record<string, number> = {};

const read = (path: string) => readFile(join(workspace, path), 'utf8');

async function shoot(name: string): Promise<void> {
  if (SCREENSHOTS) await page.screenshot({ path: join(SCREENSHOTS, `ui-${name}.png`) });
}

/** Picks the timeline entry with this seq. */
async function pick(seq: number): Promise<void> {
  await page.locator(`.timeline li[data-seq="${seq}"]`).click();
  await expect.poll(() => page.locator('.detail h2').textContent()).toContain(`#${seq} `);
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `No chromium at ${CHROMIUM}: install Debian's (apt-get install chromium), or set REWIND_CHROMIUM.`,
    );
  }
  // One workspace for the whole file (the helper's directories go after each test).
  workspace = await mkdtemp(join(tmpdir(), 'rewind-ui-test-'));
  git(workspace, ['init', '-q']);
  await writeFile(join(workspace, '.gitignore'), 'node_modules/\ndist/\n.env\n');
  await mkdir(join(workspace, 'node_modules/left-pad'), { recursive: true });
  await writeFile(join(workspace, 'node_modules/left-pad/index.js'), 'module.exports = 1;\n');
  await mkdir(join(workspace, 'dist'));
  await writeFile(join(workspace, 'dist/app.js'), 'built\n');
  await writeFile(join(workspace, '.env'), 'TOKEN=secret\n');
  await mkdir(join(workspace, 'src'));
  await writeFile(join(workspace, 'src/app.ts'), 'export const answer = 41;\n');
  await init({ workspace });
  session = await openSession({ workspace });
  await session.checkpoint('base', {
    messages: [
      { role: 'user', content: 'Fix the answer.' },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'call-1', name: 'read', input: { path: 'src/app.ts' } }],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call-1', content: 'export const answer = 41;' },
        ],
      },
    ],
    format: 'anthropic',
  });
  ids.fix = (await session.write('src/app.ts', 'export const answer = 42;\n')).id as number;
  ids.notes = (await session.write('NOTES.md', 'first\n')).id as number;
  ids.exec = (await session.exec('echo built > out.txt')).id as number;
  await session.checkpoint('fixed');
  ids.draft = (await session.exec('echo approved > approved.txt', { draft: true })).id as number;
  ids.dropped = (await session.exec('echo never > never.txt', { draft: true })).id as number;
  // A request to a service, compensable: its compensation is a command.
  service = createServer((request, response) => {
    response.writeHead(201, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ created: request.url }));
  });
  await new Promise<void>((done) => service.listen(0, '127.0.0.1', done));
  const port = (service.address() as AddressInfo).port;
  ids.http = (
    await session.http(
      { method: 'POST', url: `http://127.0.0.1:${port}/orders`, body: '{"item":"book"}' },
      { compensation: { command: 'echo cancelled > cancelled.txt' } },
    )
  ).id as number;
  // Edited since by someone else: undoing the write would trample it.
  await writeFile(join(workspace, 'NOTES.md'), 'edited by a person\n');
  ui = await startUi({ workspace, assets: join(ROOT, 'dist/ui-assets'), pollMs: 100 });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(8000);
  page.on('dialog', (dialog) => void dialog.accept());
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await ui?.close();
  await session?.close();
  service?.close();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

describe('rewind ui in a browser', () => {
  it('shows the timeline of the session, and what a checkpoint changed and said', async () => {
    const loaded = Date.now();
    await page.goto(ui.url);
    // The token moved into a cookie and out of the address bar.
    expect(page.url()).not.toContain('token=');
    await page.locator('.timeline li[data-kind="checkpoint-created"]').first().waitFor();
    const firstRender = Date.now() - loaded;
    expect(firstRender).toBeLessThan(10_000);
    const kinds = await page
      .locator('.timeline li')
      .evaluateAll((items) => items.map((item) => item.getAttribute('data-kind')));
    expect(kinds).toEqual(
      expect.arrayContaining(['session-started', 'checkpoint-created', 'action-started']),
    );
    // Closing entries are filtered out until asked for.
    expect(kinds).not.toContain('action-completed');
    await page.getByRole('button', { name: 'closings' }).click();
    await expect
      .poll(() => page.locator('.timeline li[data-kind="action-completed"]').count())
      .toBeGreaterThan(0);
    await page.getByRole('button', { name: 'closings' }).click();
    await shoot('timeline');

    const fixed = await page
      .locator('.timeline li', { hasText: 'checkpoint fixed' })
      .getAttribute('data-seq');
    await pick(Number(fixed));
    // The files changed since the previous checkpoint, with their lines.
    await expect.poll(() => page.locator('.d2h-file-list').textContent()).toContain('src/app.ts');
    expect(await page.locator('.detail .diff').textContent()).toContain('answer = 42');
    await page.getByRole('button', { name: 'side by side' }).click();
    await page.locator('.d2h-file-side-diff').first().waitFor();
    await shoot('checkpoint-diff');

    const base = await page
      .locator('.timeline li', { hasText: 'checkpoint base' })
      .getAttribute('data-seq');
    await pick(Number(base));
    // The conversation, the tool call paired with its result.
    const call = page.locator('.conversation .tool-call');
    await call.waitFor();
    expect(await call.textContent()).toContain('read');
    expect(await call.locator('.tool-result').textContent()).toContain('answer = 41');
  });

  it("shows a command's output and an action's diff", async () => {
    await pick(ids.exec as number);
    await expect.poll(() => page.locator('.detail pre.output').first().textContent()).toBe('');
    expect(await page.locator('.detail').textContent()).toContain('echo built > out.txt');
    await expect
      .poll(() => page.locator('.detail .d2h-file-list').textContent())
      .toContain('out.txt');
  });

  it('shows an undo that would trample a later edit refused, with its path, and changes nothing', async () => {
    await pick(ids.notes as number);
    await page.getByRole('button', { name: 'Undo', exact: true }).click();
    const refusal = page.locator('[role="alert"]', { hasText: 'undo refused' });
    await refusal.waitFor();
    expect(await refusal.locator('table.refusal').textContent()).toContain('NOTES.md');
    await shoot('undo-refused');
    expect(await read('NOTES.md')).toBe('edited by a person\n');
  });

  it('approves a draft after showing exactly what will run', async () => {
    await pick(ids.draft as number);
    await page.getByRole('button', { name: 'Review the draft' }).click();
    const draft = page.locator('[aria-label="draft"]');
    await draft.waitFor();
    expect(await draft.textContent()).toContain('echo approved > approved.txt');
    await shoot('draft');
    await draft.getByRole('button', { name: 'Approve and run' }).click();
    await expect.poll(() => existsSync(join(workspace, 'approved.txt'))).toBe(true);
    expect(await read('approved.txt')).toBe('approved\n');
  });

  it('discards a draft for good', async () => {
    await pick(ids.dropped as number);
    await page.getByRole('button', { name: 'Discard' }).click();
    await page.locator('[role="status"]', { hasText: 'discard done' }).waitFor();
    await expect
      .poll(() => page.locator(`.timeline li[data-seq="${ids.dropped}"] .state`).textContent())
      .toContain('discarded');
    expect(existsSync(join(workspace, 'never.txt'))).toBe(false);
  });

  it('shows an HTTP exchange as stored, and runs its compensation once confirmed', async () => {
    await pick(ids.http as number);
    const detail = page.locator('.detail');
    await expect.poll(() => detail.textContent()).toContain('{"created":"/orders"}');
    expect(await detail.textContent()).toContain('POST http://127.0.0.1:');
    await shoot('http');
    await page.getByRole('button', { name: 'Review the compensation' }).click();
    const compensation = page.locator('[aria-label="compensation"]');
    expect(await compensation.textContent()).toContain('echo cancelled > cancelled.txt');
    await compensation.getByRole('button', { name: 'Compensate' }).click();
    await expect.poll(() => existsSync(join(workspace, 'cancelled.txt'))).toBe(true);
  });

  it('commits an isolated session from the page: the plan, a conflict shown, then the commit', async () => {
    const isolated = await startIsolatedSession({ workspace, makeCurrent: false });
    try {
      await isolated.write('FROM-VIEW.md', 'made in the view\n');
      await isolated.write('src/app.ts', 'export const answer = 43;\n');
      // The workspace changed the same file meanwhile: a conflict.
      await writeFile(join(workspace, 'src/app.ts'), 'export const answer = 44;\n');
      await page.locator('select[aria-label="session"]').selectOption(isolated.id);
      await page.getByRole('button', { name: 'Commit to the workspace…' }).click();
      const plan = page.locator('[aria-label="commit plan"]');
      await plan.waitFor();
      expect(await plan.locator('table.refusal').textContent()).toContain('src/app.ts');
      // The diff of what the commit would write: the new file, not the conflicting one.
      const files = plan.locator('.d2h-file-wrapper');
      expect(await files.allInnerTexts()).toEqual([expect.stringContaining('FROM-VIEW.md')]);
      expect(await files.first().textContent()).toContain('made in the view');
      // Refused before it is tried: no button to commit.
      expect(await plan.getByRole('button', { name: 'Commit', exact: true }).count()).toBe(0);
      await shoot('commit-conflict');
      // Resolved in the view (it takes the workspace's version): the commit goes through.
      await isolated.write('src/app.ts', 'export const answer = 44;\n');
      await page.getByRole('button', { name: 'Commit to the workspace…' }).click();
      await expect.poll(() => plan.textContent()).toContain('0 conflicts');
      await plan.getByRole('button', { name: 'Commit', exact: true }).click();
      await plan.locator('[role="status"]', { hasText: 'Committed' }).waitFor();
      expect(existsSync(join(workspace, 'FROM-VIEW.md'))).toBe(true);
      expect(await read('src/app.ts')).toBe('export const answer = 44;\n');
    } finally {
      await isolated.close();
      await page.locator('select[aria-label="session"]').selectOption(session.id);
    }
  });

  it("keeps the chosen session's timeline when another session's answer arrives late", async () => {
    const other = await startIsolatedSession({ workspace, makeCurrent: false });
    const late = `**/api/read/log?session=${other.id}`;
    try {
      await page.route(late, async (route) => {
        await new Promise((resolve) => setTimeout(resolve, 800));
        await route.continue();
      });
      await page.reload();
      await page.locator('.timeline li', { hasText: 'checkpoint fixed' }).waitFor();
      const sessions = page.locator('select[aria-label="session"]');
      await sessions.selectOption(other.id);
      await sessions.selectOption(session.id);
      // The other session's log arrives after the current one's, and is dropped.
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect(await page.locator('.timeline li', { hasText: 'checkpoint fixed' }).count()).toBe(1);
    } finally {
      await page.unroute(late);
      await other.destroy();
    }
  });

  it('rolls back only the paths asked for', async () => {
    await writeFile(join(workspace, 'NOTES.md'), 'edited again\n');
    const fixed = await page
      .locator('.timeline li', { hasText: 'checkpoint fixed' })
      .getAttribute('data-seq');
    await pick(Number(fixed));
    await page.locator('[aria-label="paths"]').fill('NOTES.md');
    await page.locator('select[aria-label="scope"]').selectOption('files');
    await page.getByRole('button', { name: 'Show the rollback plan' }).click();
    const plan = page.locator('[aria-label="rollback plan"]');
    await expect.poll(() => plan.textContent()).toContain('written NOTES.md');
    expect(await plan.textContent()).not.toContain('src/app.ts');
    await plan.getByRole('button', { name: 'Roll back to fixed' }).click();
    await page.locator('[role="status"]', { hasText: 'Rolled back to fixed' }).waitFor();
    expect(await read('NOTES.md')).toBe('first\n');
    expect(await read('src/app.ts')).toBe('export const answer = 44;\n');
  });

  it('rolls back to a checkpoint from the page, the plan first, and the files change on disk', async () => {
    const base = await page
      .locator('.timeline li', { hasText: 'checkpoint base' })
      .getAttribute('data-seq');
    await pick(Number(base));
    await page.getByRole('button', { name: 'Show the rollback plan' }).click();
    const plan = page.locator('[aria-label="rollback plan"]');
    await plan.waitFor();
    expect(await plan.textContent()).toContain('src/app.ts');
    await shoot('rollback-plan');
    // The plan changed nothing yet.
    expect(await read('src/app.ts')).toBe('export const answer = 44;\n');
    await plan.getByRole('button', { name: 'Roll back to base' }).click();
    await page.locator('[role="status"]', { hasText: 'Rolled back to base' }).waitFor();
    expect(await read('src/app.ts')).toBe('export const answer = 41;\n');
    for (const made of ['approved.txt', 'cancelled.txt', 'FROM-VIEW.md']) {
      expect(existsSync(join(workspace, made))).toBe(false);
    }
    // What git ignores was left alone.
    expect(await readFile(join(workspace, '.env'), 'utf8')).toBe('TOKEN=secret\n');
    expect(existsSync(join(workspace, 'node_modules/left-pad/index.js'))).toBe(true);
  });

  it("reads while an agent's command holds the workspace lock", async () => {
    const running = session.exec('sleep 2');
    try {
      // Give the command time to take the lock.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const started = Date.now();
      await pick(ids.exec as number);
      await expect
        .poll(() => page.locator('.detail').textContent(), { timeout: 1500 })
        .toContain('echo built > out.txt');
      const fixed = await page
        .locator('.timeline li', { hasText: 'checkpoint fixed' })
        .getAttribute('data-seq');
      await pick(Number(fixed));
      await expect
        .poll(() => page.locator('.d2h-file-list').textContent(), { timeout: 1500 })
        .toContain('src/app.ts');
      expect(Date.now() - started).toBeLessThan(1800);
    } finally {
      await running;
    }
  });

  it('shows new entries as the agent works, without a reload', async () => {
    const before = await page.locator('.timeline li').count();
    await session.checkpoint('while-watching');
    await page.locator('.timeline li', { hasText: 'checkpoint while-watching' }).waitFor({
      timeout: 10_000,
    });
    expect(await page.locator('.timeline li').count()).toBeGreaterThan(before);
  });

  it('reads the checkpoints with the lines each changed, which the page shows', async () => {
    const base = ui.url.slice(0, ui.url.indexOf('/?'));
    const response = await fetch(`${base}/api/read/checkpoints`, {
      headers: { authorization: `Bearer ${ui.endpoint.token}` },
    });
    const { output } = (await response.json()) as {
      output: {
        checkpoints: { label: string; linesAdded?: number; linesRemoved?: number }[];
        warnings: string[];
      };
    };
    // src/app.ts's line replaced, NOTES.md and out.txt written: the first has nothing before it.
    expect(output.checkpoints.slice(0, 2)).toMatchObject([
      { label: 'base' },
      { label: 'fixed', linesAdded: 3, linesRemoved: 1 },
    ]);
    expect(output.checkpoints[0]).not.toHaveProperty('linesAdded');
    expect(output.warnings).toEqual([]);
  });

  it('refuses requests without the token, from another origin, or for another host', async () => {
    const base = ui.url.slice(0, ui.url.indexOf('/?'));
    const { token } = ui.endpoint;
    expect((await fetch(`${base}/api/read/log`)).status).toBe(401);
    expect(
      (await fetch(`${base}/api/read/log`, { headers: { authorization: 'Bearer wrong' } })).status,
    ).toBe(401);
    expect(
      (
        await fetch(`${base}/api/action/undo`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            origin: 'http://evil.example',
            'content-type': 'application/json',
          },
          body: JSON.stringify({ input: { last: true } }),
        })
      ).status,
    ).toBe(403);
    // An operation the page does not offer is not reachable through it.
    expect(
      (
        await fetch(`${base}/api/action/write`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ input: { path: 'x', content: 'y' } }),
        })
      ).status,
    ).toBe(404);
    expect(existsSync(join(workspace, 'x'))).toBe(false);
    // DNS rebinding: the right address under another name.
    const status = await new Promise<number | undefined>((done, fail) => {
      const request = httpRequest(
        `${base}/api/read/log`,
        { headers: { host: 'evil.example', authorization: `Bearer ${token}` } },
        (response) => {
          response.resume();
          done(response.statusCode);
        },
      );
      request.on('error', fail);
      request.end();
    });
    expect(status).toBe(421);
  });
});
