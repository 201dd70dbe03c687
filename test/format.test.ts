import { cp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENTRY_KINDS, encodeEntry, readLedgerFile } from '../src/ledger/index.js';
import { digestBytes } from '../src/lib/index.js';
import { log, note, status, verify } from '../src/session/index.js';
import { createObjectStore, encodeTree, readTree } from '../src/store/index.js';
import { ROOT } from './helpers/processes.js';
import { makeTempDirectory } from './helpers/temp.js';

/**
 * Golden fixtures: a store written by Rewind 0.1.0 in format version 1 (SPEC.md). These files
 * are never regenerated; if a change makes this test fail, that change breaks old stores.
 */
const FIXTURE = join(ROOT, 'test', 'fixtures', 'v1-workspace');
const TREE = 'sha256:ba86d5eecffc8ed01af378f2124fbf90e451328d8cdbcc2185c8eee6297bad7e';

async function copyOfFixture(): Promise<string> {
  const workspace = await makeTempDirectory();
  await cp(FIXTURE, workspace, { recursive: true });
  return workspace;
}

describe('format version 1 (golden fixtures)', () => {
  it('verifies: every chain holds and every referenced object re-hashes', async () => {
    const report = await verify({ workspace: await copyOfFixture() });
    expect(report.problems).toEqual([]);
    expect(report.isOk).toBe(true);
    expect(report.objectsChecked).toBe(5);
    expect(report.warnings).toEqual([
      expect.stringContaining('session golden0002: line 3 is a torn write'),
    ]);
  });

  it('reads every ledger line back to the exact bytes it was written as', async () => {
    for (const name of ['2026-11-29_golden0001.jsonl', '2026-11-29_golden0002.jsonl']) {
      const file = join(FIXTURE, '.rewind', 'sessions', name);
      const lines = (await readFile(file, 'utf8')).split('\n');
      const { entries } = await readLedgerFile(file);
      entries.forEach((entry, index) => {
        expect(encodeEntry(entry)).toBe(lines[index]);
      });
    }
  });

  it('decodes the stored tree and re-encodes it to the same digest', async () => {
    const store = createObjectStore(join(FIXTURE, '.rewind'));
    const tree = await readTree(store, TREE);
    expect(tree.entries.map((entry) => `${entry.type}:${entry.name}`)).toEqual([
      'symlink:latest',
      'file:run.sh',
      'directory:src',
    ]);
    expect(digestBytes(encodeTree(tree.entries))).toBe(TREE);
  });

  it('shows its sessions and timeline', async () => {
    const workspace = await copyOfFixture();
    const report = await status({ workspace });
    expect(report.currentSession).toBe('golden0001');
    expect(
      report.sessions.map(({ id, entryCount, isHashChained }) => ({
        id,
        entryCount,
        isHashChained,
      })),
    ).toEqual([
      { id: 'golden0001', entryCount: 3, isHashChained: true },
      { id: 'golden0002', entryCount: 2, isHashChained: false },
    ]);
    expect(report.objects.count).toBe(5);
    const timeline = await log({ workspace });
    expect(timeline.entries.map((entry) => entry.summary)).toEqual([
      'session started in /work/main/test/fixtures/v1-workspace by rewind 0.1.0, hash-chained',
      'note: tests pass (1 attachment)',
      'note: a tree, as later kinds reference them',
    ]);
  });

  it('accepts new entries that extend the old chain', async () => {
    const workspace = await copyOfFixture();
    await note({ workspace, text: 'written by today’s Rewind' });
    await note({ workspace, session: 'golden0002', text: 'after the torn line' });
    const report = await verify({ workspace });
    expect(report.problems).toEqual([]);
    expect(report.warnings).toEqual([
      expect.stringContaining('line 3 is not a ledger entry and was ignored'),
    ]);
  });

  it('lists in SPEC.md exactly the entry kinds this Rewind knows', async () => {
    const spec = await readFile(join(ROOT, 'SPEC.md'), 'utf8');
    const table = spec.slice(spec.indexOf('## 8. Entry kinds'), spec.indexOf('## 9.'));
    const kinds = [...table.matchAll(/^\| `([a-z-]+)` +\|/gm)].map((match) => match[1]);
    expect(kinds.sort()).toEqual(Object.keys(ENTRY_KINDS).sort());
  });
});
