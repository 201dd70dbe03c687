import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { openSession } from '../../src/index.js';
import { probeBwrap } from '../../src/sandbox/index.js';
import { rewind } from '../helpers/cli.js';
import { sandboxWorkspace } from '../helpers/nobody.js';
import { makeTempDirectory } from '../helpers/temp.js';

const idOf = (stdout: string): string => {
  const match = /action (\d+) \(/.exec(stdout);
  if (!match) throw new Error(`no action id in ${stdout}`);
  return match[1] as string;
};

describe('rewind action commands', () => {
  it('writes, deletes, moves and makes directories, each printing its id and how to undo it', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const written = await rewind(cwd, ['write', 'src/a.txt', 'hello']);
    expect(written).toMatchObject({ code: 0, stderr: '' });
    expect(written.stdout).toMatch(/^action \d+ \(reversible\): rewind undo \d+\n$/);
    expect(await readFile(join(cwd, 'src/a.txt'), 'utf8')).toBe('hello');
    const piped = await rewind(cwd, ['write', 'b.txt', '-'], { stdin: 'from stdin' });
    expect(await readFile(join(cwd, 'b.txt'), 'utf8')).toBe('from stdin');
    const moved = await rewind(cwd, ['mv', 'b.txt', 'c/b.txt']);
    const made = await rewind(cwd, ['mkdir', 'empty/dir']);
    const removed = await rewind(cwd, ['rm', 'src']);
    expect(existsSync(join(cwd, 'src'))).toBe(false);
    for (const result of [piped, moved, made, removed]) expect(result.code).toBe(0);

    const log = await rewind(cwd, ['log']);
    expect(log.stdout).toMatch(/action-started +write src\/a\.txt \(reversible\) \[done\]/);
    expect(await rewind(cwd, ['undo', idOf(removed.stdout)])).toMatchObject({ code: 0 });
    expect(await readFile(join(cwd, 'src/a.txt'), 'utf8')).toBe('hello');
    expect(await rewind(cwd, ['undo', '--last'])).toMatchObject({ code: 0 });
    expect(existsSync(join(cwd, 'empty'))).toBe(false);
    // `last` is --last (as `latest` names the newest checkpoint): it steps back to the move.
    expect(await rewind(cwd, ['undo', 'last'])).toMatchObject({ code: 0 });
    expect(await readFile(join(cwd, 'b.txt'), 'utf8')).toBe('from stdin');
    expect(existsSync(join(cwd, 'c/b.txt'))).toBe(false);
    expect((await rewind(cwd, ['log'])).stdout).toMatch(
      /mkdir empty\/dir \(reversible\) \[undone\]/,
    );

    await writeFile(join(cwd, 'src/a.txt'), 'edited');
    const refused = await rewind(cwd, ['undo', idOf(written.stdout)]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/src\/a\.txt: expected file .*, found file .*/);
  });

  it('runs a command with exec, shows what it changed, and undoes it', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await writeFile(join(cwd, 'old.txt'), 'old');
    const ran = await rewind(cwd, [
      'exec',
      '--',
      'sh',
      '-c',
      'echo new > new.txt; rm old.txt; echo done',
    ]);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain(
      'done\nexit 0: 1 created, 0 modified, 1 deleted in the workspace\n',
    );
    const id = idOf(ran.stdout);
    const diff = await rewind(cwd, ['diff', id]);
    expect(diff.stdout).toContain('new.txt');
    expect(diff.stdout).toContain('old.txt');
    expect(await rewind(cwd, ['undo', id])).toMatchObject({ code: 0 });
    expect(await readFile(join(cwd, 'old.txt'), 'utf8')).toBe('old');
    expect(existsSync(join(cwd, 'new.txt'))).toBe(false);
    const failing = await rewind(cwd, ['exec', '--timeout', '0.2', '--', 'sleep', '5']);
    expect(failing.code).toBe(124);
    expect(failing.stdout).toMatch(/timed out after \d+ ms/);
    expect(failing.stdout).toMatch(/action \d+ \(reversible, failed\)/);
  });

  it("exits with the command's own exit code: 128 + N for signal N, 124 for a timeout", async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const seven = await rewind(cwd, ['exec', 'exit 7']);
    expect(seven.code).toBe(7);
    expect(seven.stdout).toMatch(/exit 7: .*\naction \d+ \(reversible, failed\)/);
    expect((await rewind(cwd, ['exec', '--', 'sh', '-c', 'exit 3'])).code).toBe(3);
    expect((await rewind(cwd, ['exec', 'kill -TERM $$'])).code).toBe(128 + 15);
    expect((await rewind(cwd, ['exec', '--timeout', '0.2', 'sleep 5'])).code).toBe(124);
    expect((await rewind(cwd, ['--json', 'exec', 'exit 5'])).code).toBe(5);
    const draft = await rewind(cwd, ['exec', '--draft', 'exit 9']);
    expect(draft.code).toBe(0);
    expect((await rewind(cwd, ['approve', idOf(draft.stdout), '--yes'])).code).toBe(9);
    const help = await rewind(cwd, ['exec', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Exit status: the command's own exit code");
  });

  it('approves one draft after showing it, and discards another', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const first = idOf(
      (await rewind(cwd, ['exec', '--draft', '--', 'touch', 'approved.txt'])).stdout,
    );
    const second = idOf(
      (await rewind(cwd, ['exec', '--draft', '--', 'touch', 'discarded.txt'])).stdout,
    );
    const declined = await rewind(cwd, ['approve', first], { answer: 'n' });
    expect(declined.code).toBe(1);
    expect(declined.stdout).toContain('"touch"');
    expect(existsSync(join(cwd, 'approved.txt'))).toBe(false);
    const unattended = await rewind(cwd, ['approve', first]);
    expect(unattended.code).toBe(2);
    expect(unattended.stderr).toContain('--yes');
    const approved = await rewind(cwd, ['approve', first], { answer: 'y' });
    expect(approved.code).toBe(0);
    expect(existsSync(join(cwd, 'approved.txt'))).toBe(true);
    expect(await rewind(cwd, ['discard', second])).toMatchObject({ code: 0 });
    const again = await rewind(cwd, ['approve', second, '--yes']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('[ACTION_NOT_ALLOWED]');
    expect(existsSync(join(cwd, 'discarded.txt'))).toBe(false);
  });

  it('records, reports and compensates an external action', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const recorded = await rewind(cwd, [
      'record',
      'deploy',
      '--compensate-command',
      'touch undeployed',
    ]);
    expect(recorded.stdout).toMatch(
      /^action (\d+) \(compensable, interrupted\): rewind compensate \1\n$/,
    );
    const id = idOf(recorded.stdout);
    expect(await rewind(cwd, ['report', id, '--detail', 'live'])).toMatchObject({ code: 0 });
    const compensated = await rewind(cwd, ['compensate', id, '--yes']);
    expect(compensated.code).toBe(0);
    expect(existsSync(join(cwd, 'undeployed'))).toBe(true);
    expect((await rewind(cwd, ['log'])).stdout).toMatch(
      /x\.deploy deploy \(compensable\) \[compensated\]/,
    );
  });

  it('says that a compensation that failed left the action not compensated, and what to do', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const recorded = await rewind(cwd, ['record', 'deploy', '--compensate-command', 'exit 3']);
    const id = idOf(recorded.stdout);
    const failed = await rewind(cwd, ['compensate', id, '--yes']);
    expect(failed.code).toBe(3);
    const ran = Number(id) + 1;
    // It said "Compensated #2 with action 3 (reversible, failed)", as if it had been.
    expect(failed.stdout).not.toContain('Compensated');
    expect(failed.stdout).toContain(
      `The compensation of #${id} failed; #${id} is not compensated. It ran as action ${ran} (reversible, failed): rewind undo ${ran}\n` +
        `See its output with \`rewind show ${ran}\`, deal with the cause, then run \`rewind compensate ${id}\` again.\n`,
    );
    expect((await rewind(cwd, ['log'])).stdout).toMatch(
      /x\.deploy deploy \(compensable\) \[interrupted\]/,
    );

    // A compensating request whose exchange fails says the same (it printed only the error).
    const undeclared = await rewind(cwd, [
      'record',
      'release',
      '--compensate-request',
      'DELETE http://127.0.0.1:1/releases/1',
    ]);
    const released = idOf(undeclared.stdout);
    const refused = await rewind(cwd, ['compensate', released, '--yes']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('[HTTP_FAILED]');
    const sent = Number(released) + 1;
    expect(refused.stdout).toContain(
      `The compensation of #${released} failed; #${released} is not compensated. It ran as action ${sent} (irreversible, failed): cannot be undone\n` +
        `See its output with \`rewind show ${sent}\`, deal with the cause, then run \`rewind compensate ${released}\` again.\n`,
    );
  });

  it('declares an HTTP compensation and sends it when compensating', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const methods: string[] = [];
    const server = createServer((request, response) => {
      methods.push(`${request.method} ${request.url}`);
      response.end('ok');
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const sent = await rewind(cwd, [
        'http',
        'POST',
        `${url}/deploys`,
        '--compensate-request',
        `DELETE ${url}/deploys/1`,
      ]);
      expect(sent.stdout).toMatch(
        /HTTP 200\nok\naction (\d+) \(compensable\): rewind compensate \1\n/,
      );
      expect(await rewind(cwd, ['compensate', idOf(sent.stdout), '--yes'])).toMatchObject({
        code: 0,
      });
      expect(methods).toEqual(['POST /deploys', 'DELETE /deploys/1']);
      const bad = await rewind(cwd, ['record', 'x', '--compensate-request', 'DELETE']);
      expect(bad.code).toBe(2);
    } finally {
      await new Promise((done) => server.close(done));
    }
  });

  it('shows what a command stored: its output on its own streams, then how it ended', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const ran = await rewind(cwd, ['exec', 'echo out; echo err >&2; exit 3']);
    const shown = await rewind(cwd, ['show', idOf(ran.stdout)]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(
      /^action \d+: exec echo out; echo err >&2; exit 3 \(reversible, failed\) at \d{4}-\d\d-\d\d [\d:.]+\nout\nexit 3 after \d+ ms\n$/,
    );
    expect(shown.stderr).toBe('err\n');
    const written = await rewind(cwd, ['write', 'a.txt', 'hello']);
    const entries = await rewind(cwd, ['show', idOf(written.stdout)]);
    expect(entries.stdout).toMatch(
      /^action \d+: write a\.txt \(reversible, done\) at .*\nstarted: \{\n/,
    );
    expect(entries.stdout).toContain('\nclosed: {\n');
    expect(await rewind(cwd, ['show', '1'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[ACTION_NOT_FOUND]'),
    });
    expect((await rewind(cwd, ['show', 'x1'])).code).toBe(2);
  });

  it('shows a request and its response as stored, redacted, with long bodies cut unless --verbose', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const long = `${'a'.repeat(2000)}${'b'.repeat(500)}`;
    const server = createServer((_request, response) => {
      response.setHeader('x-reply', 'yes');
      response.end(long);
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/deploys`;
      const sent = await rewind(cwd, [
        '--redact',
        'http',
        'POST',
        url,
        '--header',
        'Authorization: Bearer s3cret',
        '--data',
        '{"version":2}',
      ]);
      const id = idOf(sent.stdout);
      const shown = await rewind(cwd, ['show', id]);
      expect(shown).toMatchObject({ code: 0, stderr: '' });
      expect(shown.stdout).toContain(`\nPOST ${url}\n`);
      expect(shown.stdout).toMatch(/\nauthorization: \[redacted\]\n/i);
      expect(shown.stdout).toContain('\n{"version":2}\n');
      expect(shown.stdout).toMatch(/\nHTTP 200\n(.+\n)*x-reply: yes\n/);
      expect(shown.stdout).toContain(
        `\n${'a'.repeat(2000)}\n... and 500 more characters (--verbose shows them)\n`,
      );
      expect(shown.stdout).toMatch(/Redacted before storing: .*authorization/i);
      expect(shown.stdout).not.toContain('s3cret');
      expect((await rewind(cwd, ['--verbose', 'show', id])).stdout).toContain(`\n${long}\n`);
      expect(await rewind(cwd, ['-q', 'show', id])).toEqual({ code: 0, stdout: long, stderr: '' });
    } finally {
      await new Promise((done) => server.close(done));
    }
  });

  it('shows and passes a binary response body and command output byte for byte with -q', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    // Not UTF-8: a PNG's signature, a lone continuation byte, an invalid lead byte.
    const image = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x80, 0xff, 0x00]);
    const server = createServer((_request, response) => response.end(image));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    /** What the CLI wrote on stdout, as bytes. */
    const bytesOf = async (argv: string[]) => {
      const chunks: Buffer[] = [];
      const code = await runCli(argv, {
        cwd,
        stdout: (text) => chunks.push(Buffer.from(text)),
        stderr: () => {},
      });
      return { code, stdout: Buffer.concat(chunks) };
    };
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/image.png`;
      const id = idOf((await rewind(cwd, ['http', 'GET', url])).stdout);
      // It was the body decoded as UTF-8: each byte that is not became U+FFFD (ef bf bd).
      expect(await bytesOf(['-q', 'show', id])).toEqual({ code: 0, stdout: image });
      expect(await bytesOf(['-q', 'http', 'GET', url])).toEqual({ code: 0, stdout: image });
      const shown = await rewind(cwd, ['--json', 'show', id]);
      expect(JSON.parse(shown.stdout).response.body.base64).toBe(image.toString('base64'));
      const ran = await rewind(cwd, ['exec', `printf '\\211PNG\\377'`]);
      expect(await bytesOf(['-q', 'show', idOf(ran.stdout)])).toEqual({
        code: 0,
        stdout: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff]),
      });
      expect(await bytesOf(['-q', 'exec', `printf '\\211PNG\\377'`])).toEqual({
        code: 0,
        stdout: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff]),
      });
    } finally {
      await new Promise((done) => server.close(done));
    }
  });

  it('summarizes a binary body without -q instead of printing it as text', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    // An escape sequence that clears the screen, among bytes that are not UTF-8.
    const image = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x1b, 0x5b, 0x32, 0x4a, 0xff, 0x00]);
    const server = createServer((request, response) =>
      request.resume().on('end', () => response.end(image)),
    );
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/image.png`;
      const sent = await rewind(cwd, ['http', 'GET', url]);
      const id = idOf(sent.stdout);
      const summary = `Binary body of 10 bytes, not shown: \`rewind show ${id} -q > FILE\` writes it byte for byte.\n`;
      // Both printed the body decoded as UTF-8: U+FFFD for each odd byte, and the escape as it is.
      expect(sent.stdout).toBe(
        `HTTP 200\n${summary}action ${id} (irreversible): cannot be undone\n`,
      );
      const shown = await rewind(cwd, ['show', id]);
      expect(shown.stdout).toMatch(/\nHTTP 200\n(.+\n)+\n/);
      expect(shown.stdout.endsWith(`\n\n${summary}`)).toBe(true);
      for (const odd of ['\uFFFD', '\u001b']) expect(shown.stdout).not.toContain(odd);
      // A request body that is not UTF-8 (the library sends bytes) is summarized too.
      const session = await openSession({ workspace: cwd });
      const posted = await session
        .http({ method: 'POST', url, body: image })
        .finally(() => session.close());
      const request = (await rewind(cwd, ['show', String(posted.id)])).stdout;
      expect(request).toContain(
        `\nBinary body of 10 bytes, not shown: \`rewind show ${posted.id} --json\` holds it in base64.\n`,
      );
      for (const odd of ['\uFFFD', '\u001b']) expect(request).not.toContain(odd);
    } finally {
      await new Promise((done) => server.close(done));
    }
  });

  it('refuses bad input with its code, changing nothing', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const cases: [string[], string][] = [
      [['write', '../out.txt', 'x'], 'PATH_INVALID'],
      [['undo', '42'], 'ACTION_NOT_FOUND'],
      [['http', 'GET', 'http://169.254.169.254/'], 'ADDRESS_REFUSED'],
      [['http', 'GET', 'not-a-url'], 'INVALID_ARGUMENT'],
      [['--redact-pattern', '(', 'write', 'a.txt', 'x'], 'INVALID_ARGUMENT'],
    ];
    for (const [argv, code] of cases) {
      const result = await rewind(cwd, argv);
      expect(result.code, argv.join(' ')).toBe(1);
      expect(result.stderr).toContain(`[${code}]`);
    }
    const badHeader = await rewind(cwd, [
      'http',
      'GET',
      'http://example.test/',
      '--header',
      'nocolon',
    ]);
    expect(badHeader.code).toBe(2);
    expect(existsSync(join(cwd, 'a.txt'))).toBe(false);
    expect((await rewind(cwd, ['log'])).stdout.trimEnd().split('\n')).toHaveLength(2);
  });

  it('prints the action a failed request was journaled as; a host that does not resolve is HTTP_FAILED', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const failed = await rewind(cwd, ['http', 'GET', 'http://127.0.0.1:1/']);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^action \d+ \(irreversible, failed\): cannot be undone\n$/);
    expect(failed.stderr).toContain('[HTTP_FAILED]');
    const id = Number(idOf(failed.stdout));
    const json = await rewind(cwd, ['--json', 'http', 'GET', 'http://127.0.0.1:1/']);
    expect(JSON.parse(json.stdout).error).toMatchObject({
      code: 'HTTP_FAILED',
      data: { actionId: id + 2, actionClass: 'irreversible' },
    });

    // An approved draft whose request fails says its line too (it printed only the error).
    const drafted = idOf(
      (await rewind(cwd, ['http', 'GET', 'http://127.0.0.1:1/', '--draft'])).stdout,
    );
    const approved = await rewind(cwd, ['approve', drafted, '--yes']);
    expect(approved.code).toBe(1);
    expect(approved.stdout).toMatch(
      new RegExp(
        `\\ncontent digest \\S+\\naction ${drafted} \\(irreversible, failed\\): cannot be undone\\n$`,
      ),
    );
    expect(approved.stderr).toContain('[HTTP_FAILED]');
    const quiet = idOf(
      (await rewind(cwd, ['http', 'GET', 'http://127.0.0.1:1/', '--draft'])).stdout,
    );
    expect(await rewind(cwd, ['-q', 'approve', quiet, '--yes'])).toMatchObject({
      code: 1,
      stdout: '',
    });

    const unresolved = await rewind(cwd, ['http', 'GET', 'http://no-such-host.invalid/']);
    expect(unresolved).toMatchObject({ code: 1, stdout: '' });
    expect(unresolved.stderr).toContain('does not resolve');
    expect(unresolved.stderr).toContain('[HTTP_FAILED]');
  });

  it('records a sandbox at init, shows it in status, and runs exec in it', async () => {
    const cwd = await sandboxWorkspace();
    const initialized = await rewind(cwd, ['init', '--sandbox', 'auto']);
    expect(initialized.code).toBe(0);
    const status = await rewind(cwd, ['status']);
    expect(status.stdout).toContain('sandbox auto, no network');
    const ran = await rewind(cwd, [
      'exec',
      '--',
      'sh',
      '-c',
      'test -e .rewind/rewind.json && echo seen || echo hidden',
    ]);
    expect(ran.stdout).toContain(probeBwrap().works ? 'hidden' : 'seen');
    expect((await rewind(cwd, ['init', '--sandbox', 'nope'])).code).toBe(2);
  });

  it.runIf(process.getuid?.() === 0 && probeBwrap().works)(
    'as root, refuses bwrap on a workspace owned by root, and says at every exec why auto runs commands unsandboxed',
    async () => {
      const cwd = await makeTempDirectory();
      const refused = await rewind(cwd, ['init', '--sandbox', 'bwrap']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^rewind: The bwrap sandbox cannot start: Rewind runs as root and the workspace .* belongs to root, so a sandboxed command would be root on the host .*\[SANDBOX_UNAVAILABLE\]\n$/,
      );
      expect(existsSync(join(cwd, '.rewind'))).toBe(false);
      expect((await rewind(cwd, ['init', '--sandbox', 'auto'])).stderr).toContain(
        'rewind: warning: Commands run without a sandbox (Rewind runs as root and the workspace',
      );
      // On a store with a session, --sandbox shapes nothing: ignored with a warning, not checked.
      const ignored = await rewind(cwd, ['init', '--sandbox', 'bwrap', '--network']);
      expect(ignored.code).toBe(0);
      expect(ignored.stderr).toContain(
        'rewind: warning: --sandbox bwrap and --network shape a session as it starts, and this store has one already',
      );
      expect(ignored.stderr).not.toContain('SANDBOX_UNAVAILABLE');
      const ran = await rewind(cwd, ['exec', 'true']);
      expect(ran.code).toBe(0);
      expect(ran.stderr).toContain(
        'rewind: warning: Commands run without a sandbox (Rewind runs as root and the workspace',
      );
    },
  );
});
