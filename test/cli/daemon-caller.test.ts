// What `rewind daemon` takes from the command that sends it a request, and what it leaves to it:
// real daemons and the real bin (test/helpers/daemons.ts).
import { execFileSync, spawn } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, labels, project, rewind, startDaemon } from '../helpers/daemons.js';
import { makeTempDirectory } from '../helpers/temp.js';

const messages = [{ role: 'user', content: 'go' }];

/** Runs `command` in a shell in `cwd`. */
function shell(cwd: string, command: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    const child = spawn('sh', ['-c', command], { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('close', (code) => done({ code, stderr }));
  });
}

/** The conversation checkpoint `label` recorded (shown with a note at its end). */
const conversationOf = async (workspace: string, label: string): Promise<unknown> =>
  JSON.parse((await rewind(workspace, ['conversation', 'show', label])).stdout).slice(0, 1);

describe('rewind daemon and its callers', () => {
  it("runs a command naming the caller's stdio, a /proc path or a pipe in the caller, not the daemon", async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    // Its own stdin is /dev/null, whatever it was started with.
    expect(readlinkSync(`/proc/${daemon.child.pid}/fd/0`)).toBe('/dev/null');
    // The caller's stdin (a file, as `< messages.json` gives), however it is named, and through a
    // link to it.
    const stdin = JSON.stringify(messages);
    const outside = await makeTempDirectory();
    await writeFile(join(outside, 'messages.json'), stdin);
    execFileSync('ln', ['-s', '/dev/stdin', join(outside, 'input')]);
    for (const [label, messagesFrom] of [
      ['one', '--messages /dev/stdin'],
      ['two', '--messages=/dev/fd/0'],
      ['three', '--messages /proc/self/fd/0'],
      ['four', `--messages ${join(outside, 'input')}`],
    ] as const) {
      const ran = await shell(
        workspace,
        `node ${BIN} checkpoint ${label} ${messagesFrom} < ${join(outside, 'messages.json')}`,
      );
      expect(ran.code, ran.stderr).toBe(0);
      expect(await conversationOf(workspace, label)).toEqual(messages);
    }
    // A pipe someone writes to as the command reads it.
    const fifo = join(outside, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const writer = spawn('sh', ['-c', `printf '%s' '${stdin}' > ${fifo}`]);
    const written = new Promise((resolve) => writer.once('close', resolve));
    expect((await rewind(workspace, ['checkpoint', 'five', '--messages', fifo])).code).toBe(0);
    await written;
    expect(await conversationOf(workspace, 'five')).toEqual(messages);
    // None of them was the daemon's; a plain command still is.
    expect(daemon.log()).not.toMatch(/checkpoint exit/);
    await writeFile(join(workspace, 'README.md'), '# app, six\n');
    expect((await rewind(workspace, ['checkpoint', 'six'])).code).toBe(0);
    expect(daemon.log()).toMatch(/^rewind daemon: checkpoint exit 0/m);
    expect(await labels(workspace)).toEqual(['one', 'two', 'three', 'four', 'five', 'six']);
  }, 60_000);
});
