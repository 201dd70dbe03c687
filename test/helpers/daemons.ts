// Real `rewind daemon` processes for tests, and the `rewind` command that sends them what they
// serve: the real bin, in a git repository with what users have in one.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect } from 'vitest';
import { ROOT, runNode } from './processes.js';
import { makeTempDirectory } from './temp.js';
import { lay } from './workspace.js';

export const BIN = join(ROOT, 'bin/rewind.cjs');

/** Runs `rewind` as a process; `stdin` is what it reads. */
export async function rewind(
  cwd: string,
  args: string[],
  options: { stdin?: string; env?: Record<string, string> } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await runNode([BIN, ...args], {
    cwd,
    stdin: options.stdin ?? '',
    ...(options.env && { env: options.env }),
  });
  return { code, stdout, stderr };
}

const daemons: ChildProcess[] = [];
/** Daemons started by REWIND_DAEMON=auto, by the workspace whose log names their pids. */
export const autoStarted: string[] = [];
afterEach(() => {
  for (const daemon of daemons.splice(0)) daemon.kill('SIGKILL');
  for (const workspace of autoStarted.splice(0)) {
    for (const pid of pidsIn(workspace)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
  }
});

/** The pids of the daemons REWIND_DAEMON=auto started in `workspace` (from their log). */
export function pidsIn(workspace: string): number[] {
  const log = join(workspace, '.rewind/daemon.log');
  if (!existsSync(log)) return [];
  return [...readFileSync(log, 'utf8').matchAll(/\(pid (\d+)\)/g)].map((found) => Number(found[1]));
}

/** Whether process `pid` runs (a zombie nobody reaps yet, as a daemon whose parent has gone
 * can be where the first process does not reap, does not). */
export function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Starts `rewind daemon` (of `bin`) in `cwd`; resolves once it serves, with what it printed so far. */
export async function startDaemon(
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
  args: string[] = [],
  bin = BIN,
): Promise<{ child: ChildProcess; log: () => string }> {
  const child = spawn(process.execPath, [bin, 'daemon', ...args], {
    cwd,
    env,
    // Its stdin a pipe, as one started from a script or a terminal has: it must read none of it.
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  daemons.push(child);
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  for (let waited = 0; !log.includes('serving'); waited += 20) {
    if (waited > 10_000 || child.exitCode !== null) throw new Error(`no daemon: ${log}`);
    await sleep(20);
  }
  return { child, log: () => log };
}

/**
 * Stops the daemon `child` (SIGSTOP) at a moment it holds no lock on `workspace`: once its watch
 * is live it gives it a base (a snapshot, under the workspace's lock), and stopped then it would
 * keep every command waiting, as a stopped command does (in one CI run of 2026-12-03 the test
 * below stopped it so, and timed out).
 */
export async function stopWhileUnlocked(child: ChildProcess, workspace: string): Promise<void> {
  const pid = child.pid as number;
  const lock = join(workspace, '.rewind/workspace.lock');
  const isHeldByChild = (): boolean => {
    if (!existsSync(lock)) return false;
    try {
      return (JSON.parse(readFileSync(lock, 'utf8')) as { pid: number }).pid === pid;
    } catch {
      return true; // being written: perhaps by it
    }
  };
  // The state field of /proc/PID/stat, after the command's name in parentheses: T when stopped.
  const state = (): string =>
    readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] ?? '';
  for (let attempt = 0; attempt < 200; attempt++) {
    child.kill('SIGSTOP');
    while (state() !== 'T') await sleep(5);
    if (!isHeldByChild()) return;
    child.kill('SIGCONT');
    await sleep(50);
  }
  throw new Error('the daemon held the workspace lock all along');
}

/** A git repository with what users have in one, and a store. */
export async function project(): Promise<string> {
  const workspace = await makeTempDirectory();
  await lay(workspace, {
    '.gitignore': 'node_modules/\ndist/\n.env\n',
    'src/app.ts': 'export const answer = 41;\n',
    'README.md': '# app\n',
    'node_modules/left-pad/index.js': 'module.exports = 1;\n',
    'dist/app.js': 'built\n',
    '.env': 'TOKEN=secret\n',
  });
  execFileSync('git', ['init', '-q'], { cwd: workspace });
  expect((await rewind(workspace, ['init'])).code).toBe(0);
  return workspace;
}

export const labels = async (cwd: string, env: Record<string, string> = {}) =>
  JSON.parse((await rewind(cwd, ['checkpoints', '--json'], { env })).stdout).checkpoints.map(
    (checkpoint: { label: string }) => checkpoint.label,
  );
