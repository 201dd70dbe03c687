import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeTempDirectory } from '../helpers/temp.js';
import { runCli } from './harness.js';

// A write may do part of what it was asked (a disk nearly full writes what fits; the next write
// can find room again once another file is removed). A rollback that took a short write for a
// whole one left holes of zeros in a large file it then reported restored.
describe('writes that do half of what was asked', () => {
  it('restore large files whole: a rollback and its undo give back every byte', async () => {
    const workspace = await makeTempDirectory();
    // Over 1 MiB (written in chunks through a file handle), with a run of zero blocks inside
    // (skipped, to keep the file sparse) between the data.
    const big = Buffer.concat([
      randomBytes(700_000),
      Buffer.alloc(256 * 1024),
      randomBytes(900_000),
    ]);
    await writeFile(join(workspace, 'big.bin'), big);
    await writeFile(join(workspace, 'small.txt'), 'small\n');
    expect((await runCli(workspace, ['-q', 'init'])).code).toBe(0);
    expect((await runCli(workspace, ['-q', 'checkpoint', 'one'])).code).toBe(0);
    const other = randomBytes(big.length);
    await writeFile(join(workspace, 'big.bin'), other);
    await writeFile(join(workspace, 'small.txt'), 'changed\n');

    const rollback = await runCli(workspace, ['rollback', 'one'], { fault: 'short' });
    expect(rollback.stderr).toBe('');
    expect(rollback.code).toBe(0);
    expect((await readFile(join(workspace, 'big.bin'))).equals(big)).toBe(true);
    expect(await readFile(join(workspace, 'small.txt'), 'utf8')).toBe('small\n');

    const undo = await runCli(workspace, ['undo', '--last'], { fault: 'short' });
    expect(undo.code).toBe(0);
    expect((await readFile(join(workspace, 'big.bin'))).equals(other)).toBe(true);
    expect((await runCli(workspace, ['verify'])).code).toBe(0);
  });
});
