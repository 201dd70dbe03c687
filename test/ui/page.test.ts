// The page's views in a real browser, each over a workspace of its own: diffs with binary files
// and quoted names, the rollback plan, outcomes, the buttons offered, conversations, verdicts.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  init,
  openSession,
  type Session,
  startIsolatedSession,
  startSession,
} from '../../src/index.js';
import { digestBytes } from '../../src/lib/index.js';
import { type RunningUi, startUi } from '../../src/ui/server.js';
import { damagePackedObject } from '../helpers/damage.js';
import { git } from '../helpers/git.js';
import { ROOT } from '../helpers/processes.js';

const CHROMIUM = process.env.REWIND_CHROMIUM ?? '/usr/bin/chromium';

let browser: Browser;
let page: Page;
let workspace: string;
let session: Session | undefined;
let ui: RunningUi | undefined;

/** A fresh git workspace with a Rewind store and a session open in it. */
async function setUp(): Promise<Session> {
  workspace = await mkdtemp(join(tmpdir(), 'rewind-ui-page-test-'));
  git(workspace, ['init', '-q']);
  await writeFile(join(workspace, 'notes.txt'), 'a\n');
  await init({ workspace });
  session = await openSession({ workspace });
  return session;
}

/** Serves the workspace and opens the page on it. */
async function open(): Promise<void> {
  ui = await startUi({ workspace, assets: join(ROOT, 'dist/ui-assets'), pollMs: 100 });
  await page.goto(ui.url);
  await page.locator('.timeline li').first().waitFor();
}

/** Picks the timeline entry with this seq. */
async function pick(seq: number): Promise<void> {
  await page.locator(`.timeline li[data-seq="${seq}"]`).click();
  await expect.poll(() => page.locator('.detail h2').textContent()).toContain(`#${seq} `);
}

/** The seq of the entry of checkpoint `label`. */
async function checkpointSeq(label: string): Promise<number> {
  const seq = await page
    .locator('.timeline li', { hasText: `checkpoint ${label}` })
    .getAttribute('data-seq');
  return Number(seq);
}

/** Each file of the diff shown: its name and its text, flattened. */
async function diffBlocks(): Promise<string[]> {
  await page.locator('.detail .d2h-file-wrapper').first().waitFor();
  const blocks = await page.locator('.detail .d2h-file-wrapper').allInnerTexts();
  return blocks.map((block) => block.replace(/\s+/g, ' ').trim());
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `No chromium at ${CHROMIUM}: install Debian's (apt-get install chromium), or set REWIND_CHROMIUM.`,
    );
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(8000);
  page.on('dialog', (dialog) => void dialog.accept());
}, 60_000);

afterEach(async () => {
  await ui?.close();
  await session?.close();
  ui = undefined;
  session = undefined;
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

afterAll(async () => {
  await browser?.close();
});

describe("the page's views", () => {
  it('shows a binary file in a diff as binary, each file under its own name', async () => {
    const session = await setUp();
    await session.checkpoint('one');
    await writeFile(join(workspace, 'notes.txt'), 'a\nb\n');
    await writeFile(join(workspace, 'z.bin'), Buffer.from([0, 1, 2, 255, 0, 7]));
    await session.checkpoint('two');
    const copy = (await session.exec('cp z.bin z2.bin')).id as number;
    await open();
    await pick(await checkpointSeq('two'));
    const blocks = await diffBlocks();
    expect(blocks).toHaveLength(2);
    expect(blocks[0]).toMatch(/^notes\.txt .*\+ b/);
    expect(blocks[1]).toMatch(/^z\.bin .*Binary file/);
    expect(blocks[1]).not.toContain('+ b');
    // A change of a binary file alone.
    await pick(copy);
    await expect
      .poll(() => page.locator('.detail .d2h-file-list-title').textContent())
      .toContain('Files changed (1)');
    expect(await diffBlocks()).toEqual([expect.stringMatching(/^z2\.bin .*Binary file/)]);
  });

  it('names files as they are, however the diff quoted them', async () => {
    const session = await setUp();
    const names = ['café ü.txt', 'back\\slash.txt', 'q"uote.txt', 'tab\there.txt', '-- x <b>.txt'];
    const seqs: number[] = [];
    for (const name of names) seqs.push((await session.write(name, 'x\n')).id as number);
    await open();
    for (const [index, name] of names.entries()) {
      await pick(seqs[index] as number);
      await page.locator('.detail .d2h-file-wrapper').first().waitFor();
      const shown = await page.locator('.detail .d2h-file-name').allTextContents();
      // Once in the list of files, once over the file's lines.
      expect(shown.map((text) => text.trim())).toEqual([name, name]);
    }
  });

  it('runs the rollback of the plan shown: a plan goes when its paths or scope change', async () => {
    const session = await setUp();
    await writeFile(join(workspace, 'b.txt'), 'b\n');
    await session.checkpoint('one');
    await writeFile(join(workspace, 'notes.txt'), 'changed\n');
    await writeFile(join(workspace, 'b.txt'), 'changed\n');
    await open();
    await pick(await checkpointSeq('one'));
    const paths = page.locator('[aria-label="paths"]');
    const plan = page.locator('[aria-label="rollback plan"]');
    await paths.fill('notes.txt');
    await page.getByRole('button', { name: 'Show the rollback plan' }).click();
    await expect.poll(() => plan.textContent()).toContain('notes.txt');
    // Other paths, or another scope: the plan shown no longer says what would run.
    await paths.fill('b.txt');
    expect(await plan.count()).toBe(0);
    await page.getByRole('button', { name: 'Show the rollback plan' }).click();
    await expect.poll(() => plan.textContent()).toContain('b.txt');
    await page.locator('select[aria-label="scope"]').selectOption('conversation');
    expect(await plan.count()).toBe(0);
    await page.locator('select[aria-label="scope"]').selectOption('files');
    await page.getByRole('button', { name: 'Show the rollback plan' }).click();
    await plan.getByRole('button', { name: 'Roll back to one' }).click();
    await page.locator('[role="status"]', { hasText: 'Rolled back to one' }).waitFor();
    expect(await readFile(join(workspace, 'b.txt'), 'utf8')).toBe('b\n');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('changed\n');
  });

  it('says so, with why, when an approved draft or a compensation fails', async () => {
    const session = await setUp();
    const draft = (await session.exec('echo will-fail; exit 5', { draft: true })).id as number;
    const service = createServer((_request, response) => {
      response.writeHead(201);
      response.end('{}');
    });
    await new Promise<void>((done) => service.listen(0, '127.0.0.1', done));
    try {
      const port = (service.address() as AddressInfo).port;
      const order = (
        await session.http(
          { method: 'POST', url: `http://127.0.0.1:${port}/orders` },
          { compensation: { command: 'echo no such order >&2; exit 3' } },
        )
      ).id as number;
      await open();
      await pick(draft);
      await page.getByRole('button', { name: 'Review the draft' }).click();
      await page.getByRole('button', { name: 'Approve and run' }).click();
      await page.locator('[role="alert"]', { hasText: 'approve failed' }).waitFor();
      expect(await page.locator('.detail [role="alert"]').textContent()).toContain('exited 5');
      expect(await page.locator('.detail [role="status"]').count()).toBe(0);
      await pick(order);
      await page.getByRole('button', { name: 'Review the compensation' }).click();
      await page.getByRole('button', { name: 'Compensate' }).click();
      const failed = page.locator('[role="alert"]', { hasText: 'compensate failed' });
      await failed.waitFor();
      expect(await failed.textContent()).toContain('exited 3: no such order');
      expect(await page.locator('.detail [role="status"]').count()).toBe(0);
    } finally {
      service.close();
    }
  });

  it('offers Undo for a failed command, and Compensate for a failed or interrupted action', async () => {
    const session = await setUp();
    const failed = (await session.exec('echo partial > partial.txt; exit 3')).id as number;
    const service = createServer((_request, response) => {
      response.writeHead(500);
      response.end('no');
    });
    await new Promise<void>((done) => service.listen(0, '127.0.0.1', done));
    try {
      const port = (service.address() as AddressInfo).port;
      const refused = (
        await session.http(
          { method: 'POST', url: `http://127.0.0.1:${port}/orders` },
          { compensation: { command: 'echo undo > comp.txt' } },
        )
      ).id as number;
      // Journaled and never reported: interrupted once the session is opened again.
      const deploy = (
        await session.record('deploy', {
          compensation: { command: 'echo undeploy > undeploy.txt' },
        })
      ).id as number;
      await open();
      expect(
        await page.locator(`.timeline li[data-seq="${refused}"] .state`).textContent(),
      ).toContain('failed');
      await pick(failed);
      await page.getByRole('button', { name: 'Undo', exact: true }).click();
      await page.locator('[role="status"]', { hasText: 'undo done' }).waitFor();
      expect(existsSync(join(workspace, 'partial.txt'))).toBe(false);
      for (const [id, made] of [
        [refused, 'comp.txt'],
        [deploy, 'undeploy.txt'],
      ] as const) {
        await pick(id);
        await page.getByRole('button', { name: 'Review the compensation' }).click();
        await page.getByRole('button', { name: 'Compensate' }).click();
        await expect.poll(() => existsSync(join(workspace, made))).toBe(true);
        // Its request ended too (the store is not removed under it).
        await expect.poll(() => page.locator('.busy').textContent()).toBe('');
      }
    } finally {
      service.close();
    }
  });

  it('shows LangChain messages, pairs Gemini calls of one name in order, and a Responses result once', async () => {
    const session = await setUp();
    await session.checkpoint('lc', {
      format: 'langchain',
      messages: [
        {
          lc: 1,
          type: 'constructor',
          id: ['langchain_core', 'messages', 'HumanMessage'],
          kwargs: { content: 'Hello from langchain', additional_kwargs: {}, response_metadata: {} },
        },
        {
          lc: 1,
          type: 'constructor',
          id: ['langchain_core', 'messages', 'AIMessage'],
          kwargs: {
            content: 'Hi, I am the AI',
            tool_calls: [],
            additional_kwargs: {},
            response_metadata: {},
          },
        },
      ],
    });
    await session.checkpoint('gem', {
      format: 'gemini',
      messages: [
        { role: 'user', parts: [{ text: 'List files please' }] },
        {
          role: 'model',
          parts: [
            { functionCall: { name: 'list', args: { dir: '.' } } },
            { functionCall: { name: 'list', args: { dir: 'src' } } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'list', response: { files: ['a', 'b'] } } },
            { functionResponse: { name: 'list', response: { files: ['src/app.js'] } } },
          ],
        },
        { role: 'model', parts: [{ text: 'Two listings done.' }] },
      ],
    });
    await session.checkpoint('resp', {
      format: 'openai-responses',
      messages: [
        { role: 'user', content: 'Run the build' },
        { type: 'function_call', call_id: 'fc_1', name: 'build', arguments: '{"target":"prod"}' },
        { type: 'function_call_output', call_id: 'fc_1', output: 'build ok' },
        { role: 'assistant', content: 'Built it.' },
      ],
    });
    await open();
    const conversation = page.locator('.conversation');
    await pick(await checkpointSeq('lc'));
    await expect.poll(() => conversation.textContent()).toContain('Hello from langchain');
    expect(await conversation.textContent()).toContain('Hi, I am the AI');
    await pick(await checkpointSeq('gem'));
    const calls = conversation.locator('.tool-call');
    await expect.poll(() => calls.count()).toBe(2);
    expect(await calls.nth(0).locator('.tool-result').textContent()).toContain('"b"');
    expect(await calls.nth(1).locator('.tool-result').textContent()).toContain('src/app.js');
    await pick(await checkpointSeq('resp'));
    await expect.poll(() => conversation.textContent()).toContain('Built it.');
    expect((await conversation.textContent())?.split('build ok')).toHaveLength(2);
    expect(await conversation.locator('.tool-call .tool-result').textContent()).toContain(
      'build ok',
    );
  });

  it("shows an unknown verdict's notes as the text they are", async () => {
    const session = await setUp();
    const { id, notes } = await session.test({ verifier: { command: 'echo no-json' } });
    expect(typeof notes).toBe('string');
    await open();
    await pick(id);
    const shown = await page.locator('.detail .verdict + pre').textContent();
    expect(shown).toContain(notes);
  });

  it('rolls back the paths named one a line, a comma in a name', async () => {
    const session = await setUp();
    await writeFile(join(workspace, 'a,b.txt'), 'before\n');
    await writeFile(join(workspace, 'c.txt'), 'before\n');
    await session.checkpoint('one');
    for (const name of ['a,b.txt', 'c.txt', 'notes.txt'])
      await writeFile(join(workspace, name), 'after\n');
    await open();
    await pick(await checkpointSeq('one'));
    await page.locator('[aria-label="paths"]').fill('a,b.txt\nc.txt\n');
    await page.getByRole('button', { name: 'Show the rollback plan' }).click();
    const plan = page.locator('[aria-label="rollback plan"]');
    await expect.poll(() => plan.textContent()).toContain('a,b.txt');
    await plan.getByRole('button', { name: 'Roll back to one' }).click();
    await page.locator('[role="status"]', { hasText: 'Rolled back to one' }).waitFor();
    expect(await readFile(join(workspace, 'a,b.txt'), 'utf8')).toBe('before\n');
    expect(await readFile(join(workspace, 'c.txt'), 'utf8')).toBe('before\n');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('after\n');
  });

  it("shows each isolated session's own commit plan, and closes it", async () => {
    await setUp();
    const first = await startIsolatedSession({ workspace, makeCurrent: false });
    const second = await startIsolatedSession({ workspace, makeCurrent: false });
    try {
      await first.write('FIRST.md', 'one\n');
      await second.write('SECOND.md', 'two\n');
      await open();
      const sessions = page.locator('select[aria-label="session"]');
      const plan = page.locator('[aria-label="commit plan"]');
      await sessions.selectOption(first.id);
      await page.getByRole('button', { name: 'Commit to the workspace…' }).click();
      await expect.poll(() => plan.textContent()).toContain('FIRST.md');
      // Another session: the first one's plan is not shown as if it were this one's.
      await sessions.selectOption(second.id);
      await expect.poll(() => plan.count()).toBe(0);
      await page.getByRole('button', { name: 'Commit to the workspace…' }).click();
      await expect.poll(() => plan.textContent()).toContain('SECOND.md');
      expect(await plan.textContent()).not.toContain('FIRST.md');
      await page.getByRole('button', { name: 'close the commit plan' }).click();
      await expect.poll(() => plan.count()).toBe(0);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('runs one action at a time: a double click sends one request, the buttons wait for it', async () => {
    const session = await setUp();
    await session.checkpoint('one');
    await writeFile(join(workspace, 'notes.txt'), 'changed\n');
    await open();
    await pick(await checkpointSeq('one'));
    await page.getByRole('button', { name: 'Show the rollback plan' }).click();
    const plan = page.locator('[aria-label="rollback plan"]');
    await plan.waitFor();
    const sent: string[] = [];
    const count = (request: { method(): string; url(): string }) => {
      if (request.method() === 'POST') sent.push(request.url());
    };
    const slow = '**/api/action/rollback';
    page.on('request', count);
    // The answer takes a while: the second click comes while the first request runs.
    await page.route(slow, async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 700));
      await route.continue();
    });
    try {
      await plan.getByRole('button', { name: 'Roll back to one' }).dblclick();
      await expect
        .poll(() => page.getByRole('button', { name: 'Show the rollback plan' }).isDisabled())
        .toBe(true);
      expect(await page.locator('.busy').textContent()).toContain('rollback');
      await page.locator('[role="status"]', { hasText: 'Rolled back to one' }).waitFor();
      expect(sent).toHaveLength(1);
      expect(await page.getByRole('button', { name: 'Show the rollback plan' }).isDisabled()).toBe(
        false,
      );
    } finally {
      page.off('request', count);
      await page.unroute(slow);
    }
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('a\n');
  });

  it('shows a command still running as running, with its process, and offers nothing on it', async () => {
    const session = await setUp();
    const running = session.exec('sleep 3');
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      await open();
      const line = page.locator('.timeline li[data-kind="action-started"]');
      await expect
        .poll(() => line.locator('.state').textContent())
        .toContain(`running (pid ${process.pid})`);
      await pick(Number(await line.getAttribute('data-seq')));
      expect(await page.locator('.detail').textContent()).toContain(
        `Still running in process ${process.pid}`,
      );
      expect(await page.getByRole('button', { name: 'Undo', exact: true }).count()).toBe(0);
    } finally {
      await running;
    }
    // Once it ended, it is done, without a reload.
    await expect
      .poll(() => page.locator('.timeline li[data-kind="action-started"] .state').textContent())
      .toContain('done');
  });

  it('moves through the timeline with the keyboard, and opens an entry with Enter', async () => {
    const session = await setUp();
    await session.checkpoint('one');
    await session.checkpoint('two');
    await open();
    const list = page.getByRole('listbox', { name: 'timeline' });
    const options = list.getByRole('option');
    const count = await options.count();
    expect(count).toBeGreaterThanOrEqual(3);
    const selected = () =>
      options.evaluateAll((items) => items.map((item) => item.getAttribute('aria-selected')));
    await list.focus();
    await page.keyboard.press('Home');
    expect((await selected())[0]).toBe('true');
    await page.keyboard.press('ArrowDown');
    expect((await selected()).indexOf('true')).toBe(1);
    await page.keyboard.press('End');
    await page.keyboard.press('ArrowUp');
    expect((await selected()).indexOf('true')).toBe(count - 2);
    expect((await selected()).filter((value) => value === 'true')).toHaveLength(1);
    // The option the keys are on is outlined while the list has the focus.
    const outline = await options
      .nth(count - 2)
      .evaluate((item) => item.ownerDocument.defaultView?.getComputedStyle(item).outlineStyle);
    expect(outline).toBe('solid');
    await page.keyboard.press('Enter');
    const seq = await options.nth(count - 2).getAttribute('data-seq');
    await expect.poll(() => page.locator('.detail h2').textContent()).toContain(`#${seq} `);
  });

  it('says so when the ledger cannot be read, and when the server has gone', async () => {
    await setUp();
    await open();
    const banner = page.locator('.banner[role="alert"]');
    expect(await banner.count()).toBe(0);
    await rename(join(workspace, '.rewind'), join(workspace, '.rewind-away'));
    await expect.poll(() => banner.textContent()).toContain('cannot read the ledgers');
    await rename(join(workspace, '.rewind-away'), join(workspace, '.rewind'));
    await expect.poll(() => banner.count()).toBe(0);
    await ui?.close();
    ui = undefined;
    await expect.poll(() => banner.textContent()).toContain('Disconnected');
    expect(await banner.textContent()).toContain('rewind ui');
  });

  it('clears the read error once the server can be reached again and the data loads', async () => {
    await setUp();
    const other = (await startSession({ workspace, makeCurrent: false })).id;
    await open();
    const problem = page.locator('p.problem[role="alert"]');
    const running = ui;
    if (!running) throw new Error('no ui');
    const { port, token } = running.endpoint;
    await running.close();
    ui = undefined;
    // Another session picked while the server is gone: its timeline cannot be read.
    await page.locator('select[aria-label="session"]').selectOption(other);
    await expect.poll(() => problem.count()).toBe(1);
    ui = await startUi({
      workspace,
      assets: join(ROOT, 'dist/ui-assets'),
      pollMs: 100,
      port,
      token,
    });
    // The page reconnects by itself, reads again, and the error goes with the data's return.
    await expect.poll(() => problem.count(), { timeout: 15_000 }).toBe(0);
    await expect.poll(() => page.locator(`.timeline li`).count()).toBeGreaterThan(0);
    expect(await page.locator('.banner[role="alert"]').count()).toBe(0);
  }, 40_000);

  it('shows a pruned checkpoint as pruned, with nothing to roll back to', async () => {
    const session = await setUp();
    await session.checkpoint('one');
    await writeFile(join(workspace, 'notes.txt'), 'b\n');
    await session.checkpoint('two');
    await session.prune({ keepLast: 1 });
    // The label is free again: a new checkpoint takes it.
    await session.checkpoint('one');
    await open();
    const created = page.locator('.timeline li[data-kind="checkpoint-created"]');
    const first = created.first();
    expect(await first.textContent()).toContain('pruned');
    expect(await created.nth(1).textContent()).not.toContain('pruned');
    await pick(Number(await first.getAttribute('data-seq')));
    expect(await page.locator('.detail').textContent()).toContain('was pruned');
    expect(await page.getByRole('button', { name: 'Show the rollback plan' }).count()).toBe(0);
    // The new checkpoint of that label is the one to roll back to.
    await pick(Number(await created.nth(2).getAttribute('data-seq')));
    await page.getByRole('button', { name: 'Show the rollback plan' }).waitFor();
    expect(await page.locator('.detail').textContent()).not.toContain('was pruned');
  });

  it('shows every checkpoint when an object one needs is damaged: its lines unknown, and a warning', async () => {
    const session = await setUp();
    await session.checkpoint('one');
    // b.txt is new in "two" and the same in "three": only the lines of "two" need it.
    await writeFile(join(workspace, 'notes.txt'), 'a\nb\n');
    await writeFile(join(workspace, 'b.txt'), 'only in two\n');
    await session.checkpoint('two');
    await writeFile(join(workspace, 'notes.txt'), 'a\nb\nc\nd\n');
    await session.checkpoint('three');
    const digest = digestBytes(Buffer.from('only in two\n'));
    await damagePackedObject(workspace, digest);
    await open();
    const warning = page.locator('.warning[role="status"]');
    await expect.poll(() => warning.textContent()).toContain('the lines of checkpoint two (#');
    const said = await warning.textContent();
    expect(said).toContain(`object ${digest} is damaged (OBJECT_CORRUPT)`);
    expect(said).toContain('Run `rewind verify` to see what is damaged.');
    expect(await page.locator('.problem[role="alert"]').count()).toBe(0);
    await pick(await checkpointSeq('two'));
    const facts = page.locator('.detail .facts');
    await expect.poll(() => facts.textContent()).toContain('lines unknown');
    expect(await facts.locator('.unknown').getAttribute('title')).toContain(digest);
    // The others are counted, and "three" is compared with "two", not taken for the first.
    await pick(await checkpointSeq('three'));
    await expect.poll(() => facts.textContent()).toMatch(/\+2\s*−0/);
    expect(await page.locator('.detail').textContent()).toContain('Files changed since two');
  });

  it('says so when the checkpoints cannot be read, and takes no checkpoint for the first', async () => {
    const session = await setUp();
    await session.checkpoint('one');
    await writeFile(join(workspace, 'notes.txt'), 'changed\n');
    await session.checkpoint('two');
    const listing = '**/api/read/checkpoints*';
    let isFailing = true;
    await page.route(listing, (route) =>
      isFailing
        ? route.fulfill({
            contentType: 'application/json',
            body: JSON.stringify({ error: { code: 'IO_FAILED', message: 'the disk said no' } }),
          })
        : route.continue(),
    );
    try {
      await open();
      const problem = page.locator('.problem[role="alert"]');
      await expect.poll(() => problem.textContent()).toContain('the disk said no');
      await pick(await checkpointSeq('two'));
      const detail = page.locator('.detail');
      await expect
        .poll(() => detail.textContent())
        .toContain('Files changed since the previous checkpoint');
      expect(await detail.textContent()).not.toContain('this is the first checkpoint');
      expect(await detail.textContent()).toContain('the list of checkpoints could not be read');
      // Read again (the next change to the ledger), it comes back, and the error goes.
      isFailing = false;
      await session.checkpoint('three');
      await expect.poll(() => problem.count()).toBe(0);
      await pick(await checkpointSeq('two'));
      await expect.poll(() => detail.textContent()).toContain('Files changed since one');
    } finally {
      await page.unroute(listing);
    }
  });

  it("shows a command's argv, binary and truncated output, and why an action failed", async () => {
    const session = await setUp();
    const argv = (await session.exec(['printf', '%s', 'a b'])).id as number;
    const binary = (await session.exec("printf '\\000\\001\\377'")).id as number;
    const cut = (await session.exec('yes | head -c 100', { maxOutputBytes: 10 })).id as number;
    await session.exec(['/no/such/program']).catch(() => undefined);
    await open();
    const failed = Number(
      await page
        .locator('.timeline li[data-kind="action-started"]')
        .last()
        .getAttribute('data-seq'),
    );
    const detail = page.locator('.detail');
    await pick(argv);
    const args = detail.locator('[aria-label="argv"] li');
    await expect.poll(() => args.allTextContents()).toEqual(['printf', '%s', 'a b']);
    await pick(binary);
    await expect
      .poll(() => detail.locator('.stored').first().textContent())
      .toContain('binary, 3 bytes');
    expect(await detail.textContent()).not.toContain('\uFFFD');
    await pick(cut);
    await expect
      .poll(() => detail.locator('.stored').first().textContent())
      .toContain('truncated: only the first 10 bytes were kept');
    await pick(failed);
    // The summary names the command at once; the list comes with what the action stored.
    await expect
      .poll(() => detail.locator('[aria-label="argv"] li').allTextContents())
      .toEqual(['/no/such/program']);
    expect(await detail.locator('.problem').textContent()).toContain('Failed');
  });

  it('shows a binary response body by its size', async () => {
    const session = await setUp();
    const service = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'image/png' });
      response.end(Buffer.from([0x89, 0x50, 0x00, 0xff]));
    });
    await new Promise<void>((done) => service.listen(0, '127.0.0.1', done));
    try {
      const port = (service.address() as AddressInfo).port;
      const id = (await session.http({ method: 'GET', url: `http://127.0.0.1:${port}/logo.png` }))
        .id as number;
      await open();
      await pick(id);
      await expect.poll(() => page.locator('.detail').textContent()).toContain('binary, 4 bytes');
      expect(await page.locator('.detail').textContent()).not.toContain('\uFFFD');
    } finally {
      service.close();
    }
  });

  it("fits a phone's width: one column, nothing wider than the screen", async () => {
    const session = await setUp();
    await session.checkpoint('one');
    await writeFile(join(workspace, 'a-rather-long-file-name-for-a-phone-screen.txt'), 'x\n');
    await session.checkpoint('two');
    await page.setViewportSize({ width: 375, height: 740 });
    try {
      await open();
      await pick(await checkpointSeq('two'));
      await page.locator('.detail .d2h-file-wrapper').first().waitFor();
      const overflow = await page.evaluate(
        'document.documentElement.scrollWidth - window.innerWidth',
      );
      expect(overflow).toBeLessThanOrEqual(0);
      const timeline = await page.locator('.timeline').boundingBox();
      const detail = await page.locator('.detail').boundingBox();
      // The detail under the timeline, not squeezed beside it.
      expect(detail?.y).toBeGreaterThanOrEqual((timeline?.y ?? 0) + (timeline?.height ?? 0));
      expect(detail?.width).toBeGreaterThan(300);
    } finally {
      await page.setViewportSize({ width: 1400, height: 900 });
    }
  });
});
