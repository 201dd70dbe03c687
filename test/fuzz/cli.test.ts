import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProgram } from '../../src/cli/main.js';
import { createRedactor } from '../../src/lib/index.js';
import { init } from '../../src/session/index.js';
import { rewind } from '../helpers/cli.js';
import { RUNS, trickyString, withinBound } from '../helpers/fuzz.js';
import { AS_NOBODY, type Jail, makeJail } from '../helpers/jail.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

/**
 * Random command lines through the built `rewind`, run as the unprivileged user (when the tests
 * run as root) in a workspace deep below directories it cannot write: a path check that fails
 * reaches nothing but the workspace and a sentinel beside it, which the test then inspects.
 * Every command line ends with a clear message and one of the documented exit codes, never a
 * stack trace, a crash or a hang.
 */

const WORKER = join(ROOT, 'test', 'helpers', 'cli-fuzz-worker.mjs');
const BIN = join(ROOT, 'bin', 'rewind.cjs');

/**
 * Commands that run a command, send a request, serve until stopped (`mcp`, `ui`, `daemon`) or reach a
 * database (`attach`, `push`, `pull`, `session find`): only with fixed, harmless arguments.
 */
const RUNS_SOMETHING = new Set([
  'exec',
  'http',
  'test',
  'approve',
  'compensate',
  'mcp',
  'ui',
  'daemon',
  'attach',
  'push',
  'pull',
  'session find',
]);

interface CommandShape {
  path: string[];
  /** How many positionals it takes: at least, and at most without its variadic one. */
  required: number;
  arguments: number;
  options: { flag: string; takesValue: boolean }[];
}

/** Every command of the program, as its parser knows it: names, positional count, options. */
function commandsOf(program: Command, prefix: string[] = []): CommandShape[] {
  return program.commands.flatMap((command) => {
    const path = [...prefix, command.name()];
    const shape: CommandShape = {
      path,
      required: command.registeredArguments.filter((argument) => argument.required).length,
      arguments: command.registeredArguments.length,
      options: command.options.map((option) => ({
        flag: option.long ?? option.short ?? option.flags,
        takesValue: option.required || option.optional,
      })),
    };
    return [shape, ...commandsOf(command, path)];
  });
}

const program = createProgram({ stdout: () => {}, stderr: () => {}, cwd: ROOT });
const COMMANDS = commandsOf(program).filter(
  (command) =>
    !RUNS_SOMETHING.has(command.path[0] as string) && !RUNS_SOMETHING.has(command.path.join(' ')),
);
const GLOBAL_OPTIONS = program.options.map((option) => ({
  flag: option.long ?? option.flags,
  takesValue: option.required || option.optional,
}));

let jail: Jail;
let workspace = '';

beforeAll(async () => {
  jail = await makeJail('rewind-fuzz-cli-');
  workspace = jail.workspace;
}, 30_000);

afterAll(() => jail?.remove());

const expectOutsideUntouched = () => jail.expectOutsideUntouched();

/** A long-lived process running the built CLI as the unprivileged user, one command at a time. */
function startWorker() {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [AS_NOBODY, WORKER], {
    cwd: '/',
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    async run(argv: string[], cwd: string) {
      child.stdin.write(`${JSON.stringify({ argv, cwd })}\n`);
      const { value, done } = await answers.next();
      if (done) throw new Error(`the CLI process ended (a crash?): ${stderr}`);
      return JSON.parse(value as string) as { code: number; stdout: string; stderr: string };
    },
    close() {
      child.stdin.end();
      child.kill();
    },
  };
}

/** Values a person or a script may pass: labels, ids, numbers, sizes, durations, odd paths. */
const value = fc.oneof(
  {
    weight: 4,
    arbitrary: trickyString([
      'start',
      'golden0001',
      'a.txt',
      'src',
      'src/main.ts',
      'dir',
      'messages.json',
      'bad.json',
      '-',
      'openai-chat',
      'anthropic',
      'bwrap',
      'none',
      'checkpoint-created',
      '1',
      '2',
      '3',
    ]),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '0',
      '-1',
      '1e400',
      'NaN',
      'Infinity',
      '99999999999999999999',
      '0x10',
      '1.5',
      ' 3',
      '10GiB',
      '1.5d',
      '7w',
      '-5m',
      '',
      '../outside/secret.txt',
      'link-out/secret.txt',
      'link-out',
      '/etc/passwd',
      '.rewind/rewind.json',
      '.rewind',
      '.git/config',
      'a/../../outside/x',
      `${'x'.repeat(300)}.txt`,
      `${'d/'.repeat(2_100)}f`,
      'a\nb',
      '[a-',
      '(?<',
    ),
  },
);

/** `--dir` only ever names the workspace, a place in it, or no workspace at all. */
/**
 * Places in the workspace, for what names a place Rewind writes in as asked (see
 * NAMES_A_PLACE): never `link-out` or a path through `..`, which a person may name to write
 * outside, and the sentinel would count it.
 */
const placeValue = fc.constantFrom('.', 'src', 'dir', 'a.txt', 'missing', '');

/** One option of `options`, with a value when it takes one. */
/**
 * Options and commands whose value is a place a person names, where Rewind writes as asked (the
 * workspace `--dir` and `init DIR` make a store in, the file `--messages-out` writes): given only
 * places in the workspace. `rewind init link-out` rightly makes a store through the link.
 */
const NAMES_A_PLACE = new Set(['--dir', '--messages-out']);
const positionalOf = (command: CommandShape) => (command.path[0] === 'init' ? placeValue : value);

function optionOf(options: readonly { flag: string; takesValue: boolean }[]) {
  return fc.constantFrom(...options).chain((option) => {
    if (!option.takesValue) return fc.constant([option.flag]);
    const values = NAMES_A_PLACE.has(option.flag) ? placeValue : value;
    return fc.oneof(
      values.map((text) => [option.flag, text]),
      values.map((text) => [`${option.flag}=${text}`]),
      // A value left out: the option is the last word.
      fc.constant([option.flag]),
    );
  });
}

/** A command line: a well-formed one, a command with positionals and options in any order, or words at random. */
const argv: fc.Arbitrary<string[]> = fc.oneof(
  {
    weight: 8,
    // What a person means to type: the command, its positionals, valid options after them.
    arbitrary: fc.constantFrom(...COMMANDS).chain((command) =>
      fc
        .tuple(
          fc.array(positionalOf(command), {
            minLength: command.required,
            maxLength: command.arguments,
          }),
          fc.array(optionOf([...command.options, ...GLOBAL_OPTIONS]), { maxLength: 3 }),
        )
        .map(([positionals, options]) => [...command.path, ...positionals, ...options.flat()]),
    ),
  },
  {
    weight: 4,
    arbitrary: fc.constantFrom(...COMMANDS).chain((command) =>
      fc
        .tuple(
          fc.array(positionalOf(command), { maxLength: command.arguments + 2 }),
          fc.array(
            fc.oneof(
              { weight: 3, arbitrary: optionOf([...command.options, ...GLOBAL_OPTIONS]) },
              {
                weight: 1,
                arbitrary: fc.constantFrom(
                  ['--bogus'],
                  ['-x'],
                  ['--'],
                  ['---'],
                  ['-'],
                  ['--json=1'],
                ),
              },
            ),
            { maxLength: 4 },
          ),
          fc.boolean(),
        )
        .map(([positionals, options, isOptionsFirst]) => {
          const flat = options.flat();
          return isOptionsFirst
            ? [...flat, ...command.path, ...positionals]
            : [...command.path, ...positionals, ...flat];
        }),
    ),
  },
  { weight: 1, arbitrary: fc.array(value, { maxLength: 5 }) },
);

const SHOWS_HELP = new Set(['-h', '--help', 'help', '-V', '--version']);

/** Every option that takes a value: the word after it is its value, whatever it looks like. */
const TAKES_VALUE = new Set(
  [...COMMANDS.flatMap((command) => command.options), ...GLOBAL_OPTIONS]
    .filter((option) => option.takesValue)
    .map((option) => option.flag),
);

/** True when `--json` is given as the option (not as another option's value, nor after `--`). */
function isJsonAsked(words: readonly string[]): boolean {
  for (const [index, word] of words.entries()) {
    if (word === '--') return false;
    if (word === '--json' && !TAKES_VALUE.has(words[index - 1] ?? '')) return true;
  }
  return false;
}

/** What every run of the CLI must be: a documented exit code, a message, no stack trace. */
function expectClearOutcome(
  words: readonly string[],
  result: { code: number; stdout: string; stderr: string },
): void {
  const shown = `rewind ${JSON.stringify(words)} exited ${result.code}:\n${result.stderr}`;
  // exec, approve and compensate exit with the code of the command they ran (docs/cli.md).
  const runsCommand = words.some((word) => ['exec', 'approve', 'compensate'].includes(word));
  if (!runsCommand) expect([0, 1, 2, 3], shown).toContain(result.code);
  if (!words.includes('--debug')) {
    expect(result.stderr, shown).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
  }
  expect(result.stderr, shown).not.toMatch(/unexpected error/i);
  if (result.code !== 0) expect(result.stderr.trim(), shown).not.toBe('');
  if (isJsonAsked(words) && !words.some((word) => SHOWS_HELP.has(word))) {
    if (result.stdout.trim() !== '') {
      expect(() => JSON.parse(result.stdout), `${shown}\nstdout: ${result.stdout}`).not.toThrow();
    }
  }
}

describe('fuzzing the command line', () => {
  let worker: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    worker = startWorker();
    const started = await worker.run(['init', '--sandbox', 'none'], workspace);
    expect(started.code, started.stderr).toBe(0);
    await worker.run(['checkpoint', 'start'], workspace);
  }, 30_000);

  afterAll(() => worker?.close());

  it('any command line ends with a documented exit code and a message, never a stack trace or a hang', async () => {
    await fc.assert(
      fc.asyncProperty(argv, fc.constantFrom('', 'src', 'dir'), async (words, below) => {
        const result = await withinBound(() => worker.run(words, join(workspace, below)), 15_000);
        expectClearOutcome(words, result);
      }),
      { numRuns: RUNS.normal },
    );
    await expectOutsideUntouched();
  });

  it('the commands that run something refuse odd arguments clearly, and run what they are given', async () => {
    const lines = [
      ['exec'],
      ['exec', '--timeout', '-1', '--', 'true'],
      ['exec', '--timeout', 'soon', 'true'],
      ['exec', '--', ''],
      ['exec', '--', 'no-such-command-anywhere'],
      ['exec', '--', 'true\0x'],
      ['exec', '--draft', '--', 'true'],
      ['approve', 'abc'],
      ['approve', '99999999999999999999', '--yes'],
      ['approve', '1'],
      ['compensate', '-1'],
      ['compensate', '1', '--dry-run'],
      ['http'],
      ['http', 'GET', 'not a url'],
      ['http', 'GET', 'file:///etc/passwd'],
      ['http', 'GE T', 'http://127.0.0.1:1/'],
      ['http', 'GET', 'http://127.0.0.1:1/', '--header', 'no colon'],
      ['http', 'GET', 'http://[::1', '--timeout', '0'],
      ['test', '--retries', '-1', '--verifier', 'true'],
      ['test', '--retries', 'x', '--verifier', 'true'],
      ['test', '--timeout', '0', '--verifier', 'true'],
      ['test'],
      ['mcp', '--bogus'],
      ['help', 'mcp', 'extra'],
      ['daemon', '--bogus'],
      ['attach'],
      ['attach', 'abcd'],
      ['attach', 'abcd', '--ledger', 'http://not-a-database'],
      ['push'],
      ['push', '--ledger', 'http://not-a-database', '--objects', 's3://b'],
      ['push', '--ledger', 'postgres://127.0.0.1:1/x', '--objects', 'not-a-bucket'],
      ['pull'],
      ['pull', 'abcd'],
      ['pull', 'abcd', '--ledger', 'http://not-a-database', '--objects', 's3://b'],
      ['session', 'find'],
      ['session', 'find', 'x', '--ledger', 'http://not-a-database', '--last', '0'],
    ];
    for (const words of lines) {
      const result = await withinBound(() => worker.run(words, workspace), 15_000);
      expectClearOutcome(words, result);
    }
    await expectOutsideUntouched();
  });
});

describe('fuzzing the rewind binary', () => {
  /** Runs bin/rewind.cjs as its own process (as the unprivileged user when root). */
  function rewindProcess(words: readonly string[]) {
    return new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [AS_NOBODY, BIN, ...words], {
        cwd: workspace,
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
      child.on('error', reject);
      child.on('close', (code, signal) =>
        resolve({ code: code ?? (signal ? 128 : -1), stdout, stderr }),
      );
    });
  }

  it('exits with a documented code and a message for any command line, the MCP server among them', async () => {
    const fixed = [
      ['mcp', '--bogus'],
      ['mcp', '--http', 'port'],
      ['ui', '--bogus'],
      ['ui', '--port', '99999'],
      ['help', 'ui'],
      [],
    ];
    for (const words of fixed) expectClearOutcome(words, await rewindProcess(words));
    await fc.assert(
      // What a process can be given: no NUL, and no argument over the system's 128 KiB.
      fc.asyncProperty(
        argv.filter(
          (words) =>
            !words.some((word) => word.includes('\0') || Buffer.byteLength(word) > 100_000),
        ),
        async (words) => {
          expectClearOutcome(words, await withinBound(() => rewindProcess(words), 15_000));
        },
      ),
      // A process costs a second on a loaded machine: the worker above takes the many runs.
      { numRuns: Math.ceil(RUNS.slow / 10) },
    );
    await expectOutsideUntouched();
  });
});

describe('what fuzzing the command line found', () => {
  it('refuses a redaction pattern too large to compile as INVALID_ARGUMENT, not an unexpected error', async () => {
    const directory = await makeTempDirectory();
    await init({ workspace: directory });
    const result = await rewind(directory, ['mkdir', 'd', '--redact-pattern', '\0'.repeat(60_000)]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^rewind: The redaction pattern ".{0,250} does not compile: Regular expression too large\. .*\[INVALID_ARGUMENT\]\n$/s,
    );
    expect(() => createRedactor({ patterns: ['\0'.repeat(60_000)] })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });
});
