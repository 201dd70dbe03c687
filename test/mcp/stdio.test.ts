import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

describe('rewind mcp over stdio', () => {
  it('answers a line that is not JSON with a parse error and JSON that is no message with an invalid request, then serves on', async () => {
    const root = await makeTempDirectory();
    const server = spawn(
      process.execPath,
      [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    server.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const answers: Record<string, unknown>[] = [];
    const nextAnswer = () =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const take = () => {
          const newline = stdout.indexOf('\n');
          if (newline === -1) return false;
          resolve(JSON.parse(stdout.slice(0, newline)));
          stdout = stdout.slice(newline + 1);
          return true;
        };
        if (take()) return;
        const onData = (chunk: Buffer) => {
          stdout += chunk.toString();
          if (take()) server.stdout.off('data', onData);
        };
        server.stdout.on('data', onData);
        setTimeout(() => reject(new Error(`no answer; stderr: ${stderr}`)), 10_000).unref();
      });
    try {
      server.stdin.write('this is not json\n');
      answers.push(await nextAnswer());
      server.stdin.write('\n   \n{"jsonrpc": "2.0", "id": 7, "method": 5}\n');
      answers.push(await nextAnswer());
      server.stdin.write('[1, 2\r\n');
      answers.push(await nextAnswer());
      server.stdin.write(
        `${JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-06-18',
            capabilities: {},
            clientInfo: { name: 'raw', version: '1.0.0' },
          },
        })}\n`,
      );
      answers.push(await nextAnswer());
    } finally {
      server.stdin.end();
      await new Promise((done) => server.on('exit', done));
    }
    expect(answers[0]).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    expect(answers[1]).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32600 } });
    expect(answers[2]).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    expect(answers[3]).toMatchObject({
      jsonrpc: '2.0',
      id: 1,
      result: { serverInfo: { name: 'rewind' } },
    });
    expect(stderr).toContain('Parse error: the line is not JSON');
    expect(server.exitCode).toBe(0);
  });

  it('stopped by SIGTERM during a call, finishes it, answers it, and exits', async () => {
    const root = await makeTempDirectory();
    const server = spawn(
      process.execPath,
      [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    server.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<number | null>((done) => server.on('exit', (code) => done(code)));
    const send = (message: Record<string, unknown>) =>
      server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    send({
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'raw', version: '1.0.0' },
      },
    });
    send({ method: 'notifications/initialized' });
    send({
      id: 2,
      method: 'tools/call',
      params: {
        name: 'exec',
        arguments: { command: 'touch started; sleep 1; echo done > out.txt' },
      },
    });
    for (let waited = 0; !existsSync(join(root, 'started')); waited += 20) {
      if (waited > 15_000) throw new Error('the command never started');
      await new Promise((done) => setTimeout(done, 20));
    }
    server.kill('SIGTERM');
    // stdin stays open, as a client that is still there keeps it.
    const timeout = setTimeout(() => server.kill('SIGKILL'), 15_000);
    const code = await exited;
    clearTimeout(timeout);
    expect(code).toBe(0);
    const answers = stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line));
    expect(answers.find((answer) => answer.id === 2)).toMatchObject({
      result: { structuredContent: { kind: 'exec' } },
    });
    expect(await readFile(join(root, 'out.txt'), 'utf8')).toBe('done\n');
  }, 30_000);

  it('answers every request it has read when the client closes stdin right after writing them (printf ... | rewind mcp)', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n' });
    const call = (id: number, name: string, args: Record<string, unknown>) => ({
      id,
      method: 'tools/call',
      params: { name, arguments: args },
    });
    const messages = [
      {
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'piped', version: '1.0.0' },
        },
      },
      { method: 'notifications/initialized' },
      call(2, 'checkpoint', { label: 'base' }),
      call(3, 'write', { path: 'a.txt', content: 'two\n' }),
      call(4, 'exec', { command: 'sleep 0.3; echo done > out.txt' }),
      { id: 5, method: 'tools/list' },
      call(6, 'checkpoint', { label: 'after' }),
      // A request the client cancels is not waited for (the SDK does not answer it).
      call(7, 'exec', { command: 'sleep 0.3' }),
      { method: 'notifications/cancelled', params: { requestId: 7 } },
    ];
    const piped = messages.map((message) => `${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    const { code, stdout, stderr } = await runNode(
      [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
      { stdin: piped.join('') },
    );
    expect(code, stderr).toBe(0);
    const answers = stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { id: number; result?: { isError?: boolean } });
    const answered = answers.filter((answer) => answer.id !== 7);
    expect(answered.map((answer) => answer.id).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(answered.every((answer) => answer.result && !answer.result.isError)).toBe(true);
    expect(await readFile(join(root, 'out.txt'), 'utf8')).toBe('done\n');
  }, 30_000);

  it("a second SIGTERM that stops it at once ends the exec call's command and what it started too", async () => {
    const root = await makeTempDirectory();
    const server = spawn(
      process.execPath,
      [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((done) => server.on('exit', (code) => done(code)));
    const send = (message: Record<string, unknown>) =>
      server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    send({
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'raw', version: '1.0.0' },
      },
    });
    send({ method: 'notifications/initialized' });
    // The agent's command, and a process it starts in the background: both run long.
    send({
      id: 2,
      method: 'tools/call',
      params: {
        name: 'exec',
        arguments: { command: 'sleep 300 & echo $! > child; echo $$ > shell; wait' },
      },
    });
    const pidIn = async (name: string) => {
      for (let waited = 0; ; waited += 20) {
        const text = existsSync(join(root, name)) ? await readFile(join(root, name), 'utf8') : '';
        if (text.endsWith('\n')) return Number(text);
        if (waited > 15_000) throw new Error('the command never started');
        await new Promise((done) => setTimeout(done, 20));
      }
    };
    const pids = [await pidIn('shell'), await pidIn('child')];
    const isAlive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      } catch {
        return false;
      }
    };
    expect(pids.map(isAlive)).toEqual([true, true]);
    try {
      server.kill('SIGTERM');
      await new Promise((done) => setTimeout(done, 200));
      server.kill('SIGTERM');
      expect(await exited).toBe(143);
      // Gone by the time the server has exited, not a moment later.
      expect(pids.map(isAlive)).toEqual([false, false]);
    } finally {
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
    }
  }, 30_000);

  it('a second SIGTERM while it waits for a call in flight stops it at once, saying so', async () => {
    const root = await makeTempDirectory();
    const server = spawn(
      process.execPath,
      [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let stderr = '';
    server.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((done) => server.on('exit', (code) => done(code)));
    const send = (message: Record<string, unknown>) =>
      server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    send({
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'raw', version: '1.0.0' },
      },
    });
    send({ method: 'notifications/initialized' });
    send({
      id: 2,
      method: 'tools/call',
      params: { name: 'exec', arguments: { command: 'touch started; sleep 4' } },
    });
    for (let waited = 0; !existsSync(join(root, 'started')); waited += 20) {
      if (waited > 15_000) throw new Error('the command never started');
      await new Promise((done) => setTimeout(done, 20));
    }
    const signalled = Date.now();
    server.kill('SIGTERM');
    await new Promise((done) => setTimeout(done, 200));
    server.kill('SIGTERM');
    const timeout = setTimeout(() => server.kill('SIGKILL'), 15_000);
    const code = await exited;
    clearTimeout(timeout);
    expect(Date.now() - signalled).toBeLessThan(2_500);
    expect(code).toBe(143);
    expect(stderr).toContain('SIGTERM while stopping: stopping now');
  }, 30_000);
});
