import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, onTestFinished } from 'vitest';
import { init, log, openSession } from '../../src/session/index.js';
import { createObjectStore } from '../../src/store/index.js';
import { snapshot } from '../../src/workspace/index.js';
import { ROOT, runNode } from './processes.js';
import { makeTempDirectory } from './temp.js';
import { type Layout, lay } from './workspace.js';

/**
 * A fresh workspace with the given files, a store, an open session (closed when the test ends,
 * passed or not), and a way to digest its state.
 */
export async function sessionOn(layout: Layout) {
  const workspace = await makeTempDirectory();
  await lay(workspace, layout);
  await init({ workspace });
  const session = await openSession({ workspace });
  onTestFinished(() => session.close());
  const store = createObjectStore(join(workspace, '.rewind'));
  const stateOf = async () =>
    (await snapshot(workspace, { store, storeDirectory: join(workspace, '.rewind') })).tree;
  return { workspace, session, store, stateOf };
}

/**
 * Drops the session ledger's last line, which must be a `kind` entry: as if the process had been
 * killed just before writing it (a restore's closing entry, say).
 */
export async function dropClosingEntry(workspace: string, kind: string): Promise<void> {
  const file = (await log({ workspace })).session.file;
  const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
  expect(lines.at(-1)).toContain(`"${kind}"`);
  await writeFile(file, `${lines.slice(0, -1).join('\n')}\n`);
}

/**
 * Rolls `workspace` back to `label` in a process of its own that kills itself (SIGKILL) once
 * `killAfter` paths are done: a restore cut short (see rollback-child.mjs).
 */
export function rollbackKilledAfter(workspace: string, label: string, killAfter: number) {
  return runNode([
    join(ROOT, 'test/helpers/rollback-child.mjs'),
    workspace,
    label,
    String(killAfter),
  ]);
}
