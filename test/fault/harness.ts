import { execFileSync, spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../helpers/processes.js';

/** The built CLI and the fault injector loaded before it (see inject.mjs). */
export const BIN = join(ROOT, 'bin/rewind.cjs');
export const INJECTOR = join(ROOT, 'test/fault/inject.mjs');

/** What a run of the CLI ended with. */
export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built CLI in `cwd`, with the injector loaded when `fault` is given (`count`,
 * `kill:N`, `error:CODE:N`, `error:CODE:N+`), and under `prefix` (strace) when given. The CLI
 * runs in a process group of its own, and with one libuv thread, so that a point names the same
 * call in every run.
 */
export function runCli(
  cwd: string,
  argv: readonly string[],
  options: {
    fault?: string;
    faultLog?: string;
    prefix?: readonly string[];
    timeoutMs?: number;
  } = {},
): Promise<Run> {
  const node = [process.execPath, ...(options.fault ? ['--import', INJECTOR] : []), BIN, ...argv];
  const [program, ...args] = [...(options.prefix ?? []), ...node] as [string, ...string[]];
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      cwd,
      detached: true,
      env: {
        ...process.env,
        NODE_EXTRA_CA_CERTS: '',
        FORCE_COLOR: '0',
        UV_THREADPOOL_SIZE: '1',
        ...(options.fault && { REWIND_FAULT: options.fault }),
        ...(options.faultLog && { REWIND_FAULT_LOG: options.faultLog }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }, options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Whether a run was ended by the injected kill (directly, or through strace reporting it). */
export function wasKilled(run: Run): boolean {
  return run.signal === 'SIGKILL' || run.code === 137;
}

/**
 * The points to try out of `total` (1-based): every one when `REWIND_FAULT_POINTS=all`, else
 * `REWIND_FAULT_POINTS` (default `budget`) spread evenly over the range, first and last included.
 */
export function pointsToTry(total: number, budget: number): number[] {
  const setting = process.env.REWIND_FAULT_POINTS;
  if (total <= 0) return [];
  if (setting === 'all') return Array.from({ length: total }, (_, index) => index + 1);
  const wanted = setting !== undefined && setting !== '' ? Number(setting) : budget;
  const count = Math.max(1, Math.min(total, Number.isFinite(wanted) ? wanted : budget));
  if (count === 1) return [total];
  const points = new Set<number>();
  for (let index = 0; index < count; index++) {
    points.add(1 + Math.round((index * (total - 1)) / (count - 1)));
  }
  return [...points];
}

/**
 * The last `count` points out of `total`: an operation journals its end there, where a failing
 * sync once made a restore put the workspace back though its end was in the ledger.
 */
export function lastPoints(total: number, count = 4): number[] {
  return Array.from({ length: Math.min(total, count) }, (_, index) => total - index).reverse();
}

/** Runs `work` on every item with at most `limit` at once; resolves with the results in order. */
export async function inPool<T, R>(
  items: readonly T[],
  work: (item: T, index: number) => Promise<R>,
  limit = Math.max(2, Math.min(4, availableParallelism())),
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Copies a directory with everything in it (modes, times and links kept), as `cp -a` does. */
export function copyTree(from: string, to: string): void {
  execFileSync('cp', ['-a', from, to]);
}

/** Whether strace can run here (installed, and ptrace allowed). */
export function hasStrace(): boolean {
  try {
    execFileSync('strace', ['-f', '-qq', '-o', '/dev/null', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A failure as the CLI should word it: one line (or a few) starting `rewind: `, ending with the
 * error's code in brackets, and no stack trace. Returns what is wrong, or undefined.
 */
export function problemWithFailure(run: Run): string | undefined {
  if (run.code !== 1) return `exit code ${run.code} (signal ${run.signal}), expected 1`;
  const text = run.stderr.trim();
  if (/\n\s+at .+:\d+:\d+\)?$/m.test(text) || /\bat (async )?\S+ \(.*:\d+:\d+\)/.test(text)) {
    return `a stack trace on stderr:\n${text}`;
  }
  if (!/^rewind: /m.test(text)) return `stderr does not start with "rewind: ":\n${text}`;
  if (!/\[[A-Z][A-Z_]+\]$/.test(text)) return `stderr does not end with an error code:\n${text}`;
  return undefined;
}
