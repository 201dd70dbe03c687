import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { digestBytes } from '../../src/lib/index.js';
import { openSession } from '../../src/session/index.js';
import { rewind } from '../helpers/cli.js';
import { damagePackedObject } from '../helpers/damage.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const CACHE = join('.rewind', 'cache', 'line-counts-v1.json');

/** The lines each checkpoint listed added and removed, from `rewind --json checkpoints ARGS`. */
async function linesOf(cwd: string, args: string[] = ['--lines']) {
  const listed = await rewind(cwd, ['--json', 'checkpoints', ...args]);
  expect(listed).toMatchObject({ code: 0, stderr: '' });
  const { checkpoints } = JSON.parse(listed.stdout) as {
    checkpoints: { label: string; linesAdded?: number; linesRemoved?: number }[];
  };
  return checkpoints.map(({ label, linesAdded, linesRemoved }) =>
    linesAdded === undefined ? [label] : [label, linesAdded, linesRemoved],
  );
}

/** A store whose checkpoints one, two, three add 2, 3, 4 lines to a.txt (one line changed each). */
async function threeCheckpoints(): Promise<string> {
  const cwd = await makeTempDirectory();
  await rewind(cwd, ['init', '-q']);
  const versions = ['x\n', 'y\n1\n2\n', 'z\n1\n2\n3\n4\n5\n', 'w\n1\n2\n3\n4\n5\n6\n7\n8\n9\n'];
  await lay(cwd, { 'a.txt': versions[0] as string });
  await rewind(cwd, ['checkpoint', 'zero', '-q']);
  for (const [index, label] of ['one', 'two', 'three'].entries()) {
    await lay(cwd, { 'a.txt': versions[index + 1] as string });
    await rewind(cwd, ['checkpoint', label, '-q']);
  }
  return cwd;
}

/** Removes every object of the store (loose and packed): only the ledger is left. */
async function removeObjects(cwd: string): Promise<void> {
  const objects = join(cwd, '.rewind', 'objects');
  for (const name of await readdir(objects)) {
    await rm(join(objects, name), { recursive: true, force: true });
  }
}

describe('rewind checkpoints and its line counts', () => {
  it('labels a checkpoint made without a label checkpoint-N, the next number free', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init', '-q']);
    await lay(cwd, { 'a.txt': 'a\n' });
    expect((await rewind(cwd, ['checkpoint'])).stdout).toMatch(/^Checkpoint checkpoint-1 \(#2\)/);
    await rewind(cwd, ['checkpoint', 'checkpoint-3']);
    expect((await rewind(cwd, ['checkpoint'])).stdout).toMatch(/^Checkpoint checkpoint-4 /);
    expect((await rewind(cwd, ['checkpoint'])).stdout).toMatch(/^Checkpoint checkpoint-5 /);
    expect((await rewind(cwd, ['rollback', 'checkpoint-1'])).code).toBe(0);
  });

  it('lists from the ledger alone: a store whose objects are gone still lists its checkpoints', async () => {
    const cwd = await threeCheckpoints();
    await removeObjects(cwd);
    const listed = await rewind(cwd, ['checkpoints']);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(listed.stdout.trimEnd().split('\n').slice(1)).toEqual([
      expect.stringMatching(/^zero +2 .* \+1 ~0 -0 files$/),
      expect.stringMatching(/^one +3 .* \+0 ~1 -0 files$/),
      expect.stringMatching(/^two +4 .* \+0 ~1 -0 files$/),
      expect.stringMatching(/^three +5 .* \+0 ~1 -0 files$/),
    ]);
    // Counting lines needs the files: still listed, each without its lines, and a warning says
    // which could not be counted, why, and what to run.
    const counted = await rewind(cwd, ['checkpoints', '--lines']);
    expect(counted.code).toBe(0);
    expect(counted.stdout.trimEnd().split('\n').slice(1)).toEqual([
      expect.stringMatching(/^zero +2 .* \+1 ~0 -0 files$/),
      expect.stringMatching(/^one +3 .* \+0 ~1 -0 files, \+\? -\? lines$/),
      expect.stringMatching(/^two +4 .* \+0 ~1 -0 files, \+\? -\? lines$/),
      expect.stringMatching(/^three +5 .* \+0 ~1 -0 files, \+\? -\? lines$/),
    ]);
    expect(counted.stderr).toMatch(
      /^rewind: warning: the lines of checkpoints one \(#3\), two \(#4\), three \(#5\) since the previous one could not be counted: object sha256:[0-9a-f]{64} is missing from the store \(OBJECT_NOT_FOUND\)/,
    );
    expect(counted.stderr).toContain(
      'They are listed without line counts. Run `rewind verify` to see what is damaged.',
    );
    expect(counted.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('lists the others with their lines when an object one pair needs is damaged, and says which and why', async () => {
    // b.txt is new in "two" and the same in "three": only the pair one-two reads it.
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init', '-q']);
    await lay(cwd, { 'a.txt': 'x\n' });
    await rewind(cwd, ['checkpoint', 'zero', '-q']);
    await lay(cwd, { 'a.txt': 'y\n1\n2\n' });
    await rewind(cwd, ['checkpoint', 'one', '-q']);
    const onlyInTwo = 'written in two\nand kept\n';
    await lay(cwd, { 'a.txt': 'z\n1\n2\n3\n4\n5\n', 'b.txt': onlyInTwo });
    await rewind(cwd, ['checkpoint', 'two', '-q']);
    await lay(cwd, { 'a.txt': 'w\n1\n2\n3\n4\n5\n6\n7\n8\n9\n' });
    await rewind(cwd, ['checkpoint', 'three', '-q']);
    const digest = digestBytes(Buffer.from(onlyInTwo));
    await damagePackedObject(cwd, digest);

    const listed = await rewind(cwd, ['--json', 'checkpoints', '--lines']);
    expect(listed.code).toBe(0);
    const document = JSON.parse(listed.stdout);
    expect(document.checkpoints).toMatchObject([
      { label: 'zero' },
      { label: 'one', linesAdded: 3, linesRemoved: 1 },
      { label: 'two', linesUncounted: { code: 'OBJECT_CORRUPT', digest } },
      { label: 'three', linesAdded: 5, linesRemoved: 1 },
    ]);
    expect(document.checkpoints[2]).not.toHaveProperty('linesAdded');
    expect(document.checkpoints[2].linesUncounted.message).toContain(digest);
    const warning =
      `the lines of checkpoint two (#4) since the previous one could not be counted: object ${digest} is damaged (OBJECT_CORRUPT). ` +
      'It is listed without line counts. Run `rewind verify` to see what is damaged.';
    expect(document.warnings).toEqual([warning]);
    expect(listed.stderr).toBe(`rewind: warning: ${warning}\n`);

    const text = await rewind(cwd, ['checkpoints', '--lines']);
    expect(text).toMatchObject({ code: 0, stderr: `rewind: warning: ${warning}\n` });
    expect(text.stdout.trimEnd().split('\n').slice(1)).toEqual([
      expect.stringMatching(/^zero +2 .* \+1 ~0 -0 files$/),
      expect.stringMatching(/^one +3 .* \+0 ~1 -0 files, \+3 -1 lines$/),
      expect.stringMatching(/^two +4 .* \+1 ~1 -0 files, \+\? -\? lines$/),
      expect.stringMatching(/^three +5 .* \+0 ~1 -0 files, \+5 -1 lines$/),
    ]);
    // The counts made were cached; the one that could not be is not.
    expect(Object.keys(JSON.parse(await readFile(join(cwd, CACHE), 'utf8')).pairs)).toHaveLength(2);
    expect((await rewind(cwd, ['checkpoints', '--lines', '-q'])).stderr).toBe('');
  });

  it('still fails when the ledger cannot be read', async () => {
    const cwd = await threeCheckpoints();
    const sessions = join(cwd, '.rewind', 'sessions');
    const [ledger] = await readdir(sessions);
    await rename(join(sessions, ledger as string), join(cwd, 'moved.jsonl'));
    await mkdir(join(sessions, ledger as string));
    const listed = await rewind(cwd, ['checkpoints', '--lines']);
    expect(listed.code).not.toBe(0);
    expect(listed.stderr).toContain('[LEDGER_CORRUPT]');
  });

  it('counts lines with --lines, and takes them from its cache the second time', async () => {
    const cwd = await threeCheckpoints();
    const expected = [['zero'], ['one', 3, 1], ['two', 4, 1], ['three', 5, 1]];
    expect(await linesOf(cwd, [])).toEqual([['zero'], ['one'], ['two'], ['three']]);
    await expect(readFile(join(cwd, CACHE))).rejects.toThrow(/ENOENT/);
    expect(await linesOf(cwd)).toEqual(expected);
    expect(JSON.parse(await readFile(join(cwd, CACHE), 'utf8'))).toMatchObject({
      format: 'rewind-line-counts',
      version: 1,
    });
    // The counts now come from the cache: the objects they were counted from are not read.
    await removeObjects(cwd);
    expect(await linesOf(cwd)).toEqual(expected);
    const text = await rewind(cwd, ['checkpoints', '--lines']);
    expect(text.stdout.trimEnd().split('\n').slice(1)).toEqual([
      expect.stringMatching(/^zero +2 .* \+1 ~0 -0 files$/),
      expect.stringMatching(/^one +3 .* \+0 ~1 -0 files, \+3 -1 lines$/),
      expect.stringMatching(/^two +4 .* \+0 ~1 -0 files, \+4 -1 lines$/),
      expect.stringMatching(/^three +5 .* \+0 ~1 -0 files, \+5 -1 lines$/),
    ]);
  });

  it('ignores a damaged or foreign cache file and writes a good one', async () => {
    const cwd = await threeCheckpoints();
    const expected = await linesOf(cwd);
    const good = JSON.parse(await readFile(join(cwd, CACHE), 'utf8'));
    const wrongCounts = Object.fromEntries(
      Object.keys(good.pairs).map((key) => [key, [1000, 1000]]),
    );
    for (const damaged of [
      '\0\0\0\0',
      '{"format":"rewind-line-counts","version":1,"pairs":',
      JSON.stringify({ ...good, version: 2, pairs: wrongCounts }),
      JSON.stringify({ ...good, format: 'something else', pairs: wrongCounts }),
      JSON.stringify({
        ...good,
        pairs: Object.fromEntries(Object.keys(good.pairs).map((key) => [key, [-1, 'x']])),
      }),
    ]) {
      await writeFile(join(cwd, CACHE), damaged);
      expect(await linesOf(cwd)).toEqual(expected);
      expect(JSON.parse(await readFile(join(cwd, CACHE), 'utf8'))).toEqual(good);
    }
    // A directory in its place: the counts are still listed.
    await rm(join(cwd, CACHE));
    await lay(cwd, { [`${CACHE}/inside`]: 'x' });
    expect(await linesOf(cwd)).toEqual(expected);
  });

  it('counts from the previous checkpoint still listed after a prune, and gc drops what it removed', async () => {
    const cwd = await threeCheckpoints();
    expect(await linesOf(cwd)).toEqual([['zero'], ['one', 3, 1], ['two', 4, 1], ['three', 5, 1]]);
    // Drop "two" from the middle: "three" now counts from "one".
    const session = await openSession({ workspace: cwd });
    try {
      await session.checkpoint('last');
      expect((await session.prune({ keepLast: 1, labelPrefix: 't' })).pruned).toMatchObject([
        { label: 'two' },
      ]);
    } finally {
      await session.close();
    }
    expect(await linesOf(cwd)).toEqual([['zero'], ['one', 3, 1], ['three', 8, 1], ['last', 0, 0]]);
    const pairsOf = async () =>
      Object.keys(JSON.parse(await readFile(join(cwd, CACHE), 'utf8')).pairs).length;
    // zero-one, one-two, two-three, three-last, one-three.
    expect(await pairsOf()).toBe(5);
    expect((await rewind(cwd, ['gc', '--grace-seconds', '0', '-q'])).code).toBe(0);
    // The tree of "two" is gone, and the two pairs it was in.
    expect(await pairsOf()).toBe(3);
    await removeObjects(cwd);
    expect(await linesOf(cwd)).toEqual([['zero'], ['one', 3, 1], ['three', 8, 1], ['last', 0, 0]]);
  });
});
