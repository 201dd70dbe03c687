import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const SECRET = 'sk-abcdefgh12345';
const PATTERN = 'sk-[a-z0-9]{8,}';

/** The files under `directory` that hold `text` ('' for none). */
function filesHolding(text: string, directory: string): string {
  try {
    return execFileSync('grep', ['-rlF', text, directory], { encoding: 'utf8' });
  } catch (error) {
    if ((error as { status?: number }).status === 1) return '';
    throw error;
  }
}

/** Runs the built `rewind` in a process of its own. */
function rewindProcess(cwd: string, args: string[]) {
  return runNode([join(ROOT, 'bin/rewind.cjs'), ...args], { cwd });
}

const idOf = (stdout: string): string => {
  const match = /action (\d+) \(/.exec(stdout);
  if (!match) throw new Error(`no action id in ${stdout}`);
  return match[1] as string;
};

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((done) => server.close(done))));
});

describe('redaction and private addresses belong to the session', () => {
  it('a plain `rewind approve ID` in a new process stores no secret of a draft made with --redact-pattern', async () => {
    const cwd = await makeTempDirectory();
    expect((await rewindProcess(cwd, ['init'])).code).toBe(0);
    const drafted = await rewindProcess(cwd, [
      '--redact-pattern',
      PATTERN,
      'exec',
      '--draft',
      `echo ${SECRET}`,
    ]);
    expect(drafted.code).toBe(0);
    // As the README shows it: no flag at all.
    const approved = await rewindProcess(cwd, ['approve', idOf(drafted.stdout), '--yes']);
    expect(approved).toMatchObject({ code: 0 });
    // It shows the person exactly what runs; what the command printed comes back redacted.
    expect(approved.stdout).toContain(`"command": "echo ${SECRET}"`);
    expect(approved.stdout).toMatch(/\n\[redacted\]\nexit 0/);
    // The draft's verbatim copy is gone once it ran: the secret is nowhere in the store.
    expect(filesHolding(SECRET, join(cwd, '.rewind'))).toBe('');
    const log = await rewindProcess(cwd, ['log']);
    expect(log.stdout).toContain(`session protections added: redaction of /${PATTERN}/`);
  });

  it('a session started with --redact redacts in every later command, which can add but never remove', async () => {
    const cwd = await makeTempDirectory();
    const initialized = await rewind(cwd, ['--redact', 'init']);
    expect(initialized.code).toBe(0);
    const exec = await rewind(cwd, ['exec', 'echo postgres://app:PG-PASSWORD-9@db/app']);
    expect(exec.stdout).toContain('postgres://app:[redacted]@db/app');
    // A pattern given once stays.
    await rewind(cwd, ['--redact-pattern', PATTERN, 'exec', 'true']);
    await rewind(cwd, ['exec', `echo ${SECRET}`]);
    expect(filesHolding('PG-PASSWORD-9', join(cwd, '.rewind'))).toBe('');
    expect(filesHolding(SECRET, join(cwd, '.rewind'))).toBe('');
    const status = await rewind(cwd, ['status']);
    expect(status.stdout).toContain('redacts credentials and 1 pattern');
  });

  it('--redact given to init on a store that has a session adds it to that session', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const again = await rewind(cwd, ['--redact', 'init']);
    expect(again.code).toBe(0);
    await rewind(cwd, ['exec', 'echo https://u:URL-PASSWORD-7@host/']);
    expect(filesHolding('URL-PASSWORD-7', join(cwd, '.rewind'))).toBe('');
  });

  it('a session started with --block-private refuses private addresses in every later command', async () => {
    const server = createServer((_request, response) => response.end('ok'));
    servers.push(server);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['--block-private', 'init']);
    const refused = await rewind(cwd, ['http', 'GET', url]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/private|loopback/i);
  });

  it('a new session keeps only what it is started with, and says what the current one had', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['--redact', '--block-private', 'init']);
    const started = await rewind(cwd, ['session', 'new']);
    expect(started.code).toBe(0);
    expect(started.stderr).toMatch(
      /^rewind: warning: The new session \w+ does not have the redaction of credentials and refusal of private addresses of session \w+/,
    );
    const kept = await rewind(cwd, ['--redact', '--block-private', 'session', 'new']);
    expect(kept.stderr).toBe('');
  });
});
