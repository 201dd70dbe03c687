// Short programs (GNU find, `sync -f`) run from a process that may have grown large. Node 20
// starts a child with fork(2), which copies the parent's page tables, so a start costs more the
// more memory the process holds (measured on the project VM: 4 ms at 90 MB, 35 to 48 ms at 400
// MB, which a live process reaches after a first checkpoint of 10,000 files), and every page the
// parent writes afterwards faults once. Past RSS_FOR_SHELLS, a process runs them through small
// shells of its own instead (`sh -s`, reading commands from a pipe), started once each, which
// fork cheaply: about 2 ms a program at any size of the parent.
import { type ChildProcess, spawn } from 'node:child_process';
import { nodeCrypto } from './builtins.js';

/** What a program did. */
export interface ProgramResult {
  /** False when it could not be started (not found, or not executable). */
  isStarted: boolean;
  /** Its exit status (not 0 when it was killed). */
  status: number;
  stdout: Buffer;
}

/** Resident memory past which programs go through the shells (see the top of this file). */
const RSS_FOR_SHELLS = 128 * 1024 * 1024;

/** At most this many shells: as many programs as run at once (finds side by side). */
const MOST_SHELLS = 4;

/** The status a POSIX shell gives a command it cannot find (127) or cannot execute (126). */
const NOT_STARTED = new Set([126, 127]);

/**
 * Runs `file` with `args` (stdin empty, stderr dropped) and collects its stdout. A program whose
 * shell dies under it is run again directly, so it must be one that can run twice (find, sync).
 */
export async function runProgram(file: string, args: readonly string[]): Promise<ProgramResult> {
  const shell = usesShells([file, ...args]) ? takeShell() : undefined;
  if (shell) {
    const result = await shell.run(file, args);
    if (result) return result;
  }
  return runDirectly(file, args);
}

/**
 * Whether to go through a shell: on a POSIX system with a PATH to pass on, for arguments a
 * shell can be given (no NUL: spawn refuses those), when the process is large
 * (`REWIND_PROGRAM_SHELLS=1` always, `0` never: for tests).
 */
function usesShells(words: readonly string[]): boolean {
  const setting = process.env.REWIND_PROGRAM_SHELLS;
  if (setting === '0' || process.platform === 'win32' || process.env.PATH === undefined) {
    return false;
  }
  if (words.some((word) => word.includes('\0'))) return false;
  return setting === '1' || process.memoryUsage.rss() >= RSS_FOR_SHELLS;
}

function runDirectly(file: string, args: readonly string[]): Promise<ProgramResult> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', () => resolve({ isStarted: false, status: -1, stdout: Buffer.alloc(0) }));
    child.on('close', (code) =>
      resolve({ isStarted: true, status: code ?? -1, stdout: Buffer.concat(chunks) }),
    );
  });
}

/** A word as a POSIX shell reads it back exactly: in single quotes, each quote spelled out. */
function quoted(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The end of a program's output: the request's token, its status, a newline. */
const END = /([0-9a-f]{32}) (\d+)\n$/;

/** Shells not running a program. */
const idle: Shell[] = [];
let shellCount = 0;

/** An idle shell, or a new one while there are fewer than MOST_SHELLS; else undefined. */
function takeShell(): Shell | undefined {
  const shell = idle.pop();
  if (shell) return shell;
  if (shellCount >= MOST_SHELLS) return undefined;
  return Shell.start();
}

/**
 * One `sh -s`: a request is a line of shell (PATH as this process has it now, the program and
 * its arguments quoted, then `printf` of a random token and the status), answered on its stdout
 * by the program's output and that end. It never keeps this process alive while idle, and exits
 * when this process does (its stdin closes). One that dies is dropped: its request, and the next
 * ones, run directly.
 */
class Shell {
  #child: ChildProcess;
  #chunks: Buffer[] = [];
  #request: { token: string; resolve: (result: ProgramResult | undefined) => void } | undefined;
  #isGone = false;

  private constructor(child: ChildProcess) {
    this.#child = child;
    shellCount += 1;
    child.on('error', () => this.#drop());
    child.on('exit', () => this.#drop());
    child.stdin?.on('error', () => this.#drop());
    child.stdout?.on('data', (chunk: Buffer) => this.#receive(chunk));
    this.#setKeepsAlive(false);
  }

  static start(): Shell | undefined {
    try {
      return new Shell(spawn('sh', ['-s'], { stdio: ['pipe', 'pipe', 'ignore'] }));
    } catch {
      return undefined;
    }
  }

  /** Runs a program; undefined when the shell died first (the caller runs it directly). */
  run(file: string, args: readonly string[]): Promise<ProgramResult | undefined> {
    return new Promise((resolve) => {
      if (this.#isGone) {
        resolve(undefined);
        return;
      }
      const token = nodeCrypto().randomBytes(16).toString('hex');
      this.#request = { token, resolve };
      this.#setKeepsAlive(true);
      const command = [file, ...args].map(quoted).join(' ');
      const path = quoted(process.env.PATH ?? '');
      this.#child.stdin?.write(
        `PATH=${path}; export PATH; ${command} </dev/null 2>/dev/null; printf '%s %s\\n' ${token} "$?"\n`,
      );
    });
  }

  #receive(chunk: Buffer): void {
    this.#chunks.push(chunk);
    const request = this.#request;
    if (!request || chunk[chunk.length - 1] !== 0x0a) return;
    // The end is short: the last chunks that hold 64 bytes are enough to find it.
    let tailBytes = 0;
    let first = this.#chunks.length;
    while (first > 0 && tailBytes < 64) tailBytes += (this.#chunks[--first] as Buffer).length;
    const tail = Buffer.concat(this.#chunks.slice(first)).toString('latin1');
    const end = END.exec(tail);
    if (end?.[1] !== request.token) return;
    const output = Buffer.concat(this.#chunks);
    this.#chunks = [];
    this.#request = undefined;
    this.#setKeepsAlive(false);
    idle.push(this);
    const status = Number(end[2]);
    request.resolve({
      isStarted: !NOT_STARTED.has(status),
      status,
      stdout: output.subarray(0, output.length - (end[0] as string).length),
    });
  }

  /** While a program runs, this process waits for it; otherwise the shell keeps nothing alive. */
  #setKeepsAlive(isKept: boolean): void {
    for (const handle of [this.#child, this.#child.stdin, this.#child.stdout] as const) {
      const refs = handle as unknown as { ref?: () => void; unref?: () => void } | null;
      if (isKept) refs?.ref?.();
      else refs?.unref?.();
    }
  }

  #drop(): void {
    if (this.#isGone) return;
    this.#isGone = true;
    shellCount -= 1;
    const at = idle.indexOf(this);
    if (at !== -1) idle.splice(at, 1);
    this.#child.kill();
    const request = this.#request;
    this.#request = undefined;
    this.#setKeepsAlive(false);
    request?.resolve(undefined);
  }
}
