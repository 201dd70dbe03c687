/**
 * What every command shares: the global flags, the target an operation runs on (the workspace and
 * a session opened on demand, closed after), printing a result, asking a person, the exit code.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import {
  displayPath,
  type LockWait,
  locateWorkspace,
  type OpenSessionOptions,
  openSession,
  type Session,
} from '../index.js';
import {
  type AnyOperation,
  checkInput,
  type GivenInputOf,
  type InputProblem,
  type OperationTarget,
  type OutputOf,
} from '../operations/index.js';
import { jsonReplacer, UsageError } from './errors.js';
import { boundLists } from './format.js';
import { sessionOf, spellingOf } from './options.js';
import { createProgressLine } from './progress.js';

/** Where the CLI reads and writes; the real process by default, buffers in tests. */
export interface CliIo {
  /** Text, or bytes written as they are (a stored output that is not UTF-8, by `show`). */
  stdout: (text: string | Uint8Array) => void;
  stderr: (text: string | Uint8Array) => void;
  cwd: string;
  /** What `rewind write PATH -` reads; the process's standard input by default. */
  stdin?: AsyncIterable<Uint8Array>;
  /** Asks a person a question and resolves with the answer; absent when nobody can answer. */
  prompt?: (question: string) => Promise<string>;
  /**
   * Runs `rewind mcp` with the arguments after `mcp` and resolves with its exit code: the MCP
   * server is an edge of its own, which the CLI may not import, so the process hands it in.
   */
  serveMcp?: (argv: readonly string[]) => Promise<number>;
  /** Runs `rewind ui` with its own arguments; absent where no server can run (tests of the CLI alone). */
  serveUi?: (argv: readonly string[]) => Promise<number>;
  /**
   * Opens the sessions commands run on, and takes them back after: by default each command opens
   * its own and closes it; `rewind daemon` keeps them open, and watching, between commands.
   */
  sessions?: SessionKeeper;
  /** Whether stdout is a terminal: colour is used only there, unless the environment says. */
  isTerminal?: boolean;
  /** Whether stderr is a terminal: a long operation shows a progress line only there. */
  isErrorTerminal?: boolean;
  /** The environment, where `NO_COLOR` and `FORCE_COLOR` are read; absent: neither is set. */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Where commands get their sessions: see {@link CliIo.sessions}. */
export interface SessionKeeper {
  open(options: OpenSessionOptions): Promise<Session>;
  /** Takes back a session {@link SessionKeeper.open} gave, once the command is done with it. */
  release(session: Session): Promise<void>;
  /** What the session finished or undid on opening, still to be said (it is said once). */
  recoveriesToSay(session: Session): readonly string[];
}

/** Each command opens its session and closes it after. */
const ONE_PER_COMMAND: SessionKeeper = {
  open: openSession,
  release: (session) => session.close(),
  recoveriesToSay: (session) => session.recoveries(),
};

/** The keeper of the sessions commands run on here. */
export const sessionsOf = (io: CliIo): SessionKeeper => io.sessions ?? ONE_PER_COMMAND;

/** The options of `rewind` itself, before the command. */
export interface GlobalFlags {
  dir?: string;
  json?: boolean;
  quiet?: boolean;
  verbose?: boolean;
  debug?: boolean;
  redact?: boolean;
  redactPattern?: string[];
  blockPrivate?: boolean;
}

/** How a command's text is shown: the global flags, and whether stdout takes colour. */
export interface Presentation extends GlobalFlags {
  isColor: boolean;
}

/**
 * Whether stdout takes colour. `FORCE_COLOR` (non-empty) decides first, as in Node: on, unless it
 * is `0` or `false`. Then `NO_COLOR` (non-empty) turns it off. Else colour is used on a terminal.
 */
export function isColorWanted(io: Pick<CliIo, 'env' | 'isTerminal'>): boolean {
  const force = io.env?.FORCE_COLOR;
  if (force) return force !== '0' && force !== 'false';
  if (io.env?.NO_COLOR) return false;
  return io.isTerminal === true;
}

export const EXIT_OK = 0;
/** A refused or failed operation. */
export const EXIT_FAILED = 1;
/** A usage error: an unknown command or option, a missing or malformed argument. */
export const EXIT_USAGE = 2;
/** `rewind test`: the verifier gave no verdict. */
export const EXIT_UNKNOWN = 3;
/**
 * The command was done, but what it was to write to a file a person named could not be written
 * (`rollback --messages-out FILE`): the message says how to get it.
 */
export const EXIT_DONE_UNWRITTEN = 4;

/** What a command printed, for each stream: text, or bytes that are not UTF-8, as they are. */
export interface Passthrough {
  stdout: string | Uint8Array;
  stderr: string | Uint8Array;
}

/** How a command shows what its operation returned. */
export interface CliPresenter<Output> {
  /**
   * What a command run by the operation printed, passed through before the text, each stream to
   * its own, even with `--quiet` (it is the output asked for); not with `--json`, whose document
   * holds it.
   */
  passthrough?(output: Output, globals: GlobalFlags): Passthrough;
  /** The text for people; nothing is printed when it is empty. */
  text(output: Output, presentation: Presentation): string;
  /** The `--json` document. Default: the output itself. */
  json?(output: Output): unknown;
  /** Printed on stderr unless `--quiet`. */
  warnings?(output: Output): readonly string[];
  /** The exit code, when the output decides one (undefined leaves it as it is: 0 unless set). */
  exitCode?(output: Output): number | undefined;
}

/** What a command passes an operation: its input keys, with values as the command line gave them. */
export type CliInput<O extends AnyOperation> = { [Key in keyof GivenInputOf<O>]?: unknown };

/** What commands use to run operations and show their results. */
export interface CliContext {
  readonly io: CliIo;
  globalsOf(command: Command): GlobalFlags;
  /**
   * Runs `work` with the target of `command`: the workspace (`--dir`, else the nearest one with
   * a store, unless `workspace` is given) and the `--session` session, opened on first use and
   * closed after.
   */
  withTarget<T>(
    command: Command,
    work: (target: OperationTarget) => Promise<T>,
    workspace?: string,
  ): Promise<T>;
  /** Checks `input` against the operation's schema (a problem is a usage error), then runs it. */
  run<O extends AnyOperation>(
    command: Command,
    target: OperationTarget,
    operation: O,
    input: CliInput<O>,
  ): Promise<OutputOf<O>>;
  /** Prints `output` (text, or the `--json` document), its warnings, and sets the exit code. */
  emit<T>(command: Command, output: T, presenter: CliPresenter<T>): void;
  /** {@link CliContext.run} in the command's target, then {@link CliContext.emit}. */
  perform<O extends AnyOperation>(
    command: Command,
    operation: O,
    input: CliInput<O>,
    presenter: CliPresenter<OutputOf<O>>,
    workspace?: string,
  ): Promise<void>;
  /** Asks a person; true at once with `isYes`. Throws a usage error when nobody can answer. */
  confirm(command: Command, isYes: boolean, question: string): Promise<boolean>;
  setExitCode(code: number): void;
}

/** The usage error for an input the operation's schema refused, in the command line's words. */
function usageErrorOf(
  command: Command,
  problem: InputProblem,
  input: Record<string, unknown>,
): UsageError {
  if (problem.key === undefined) {
    return new UsageError(
      problem.message.replace(/`(\w+)`/g, (_match, key: string) => spellingOf(command, key)),
    );
  }
  const value = input[problem.key];
  const given = typeof value === 'string' || typeof value === 'number' ? `, not "${value}"` : '';
  return new UsageError(`${spellingOf(command, problem.key)} ${problem.message}${given}.`);
}

/** The context commands share; the exit code they set is written to `state`. */
export function createCliContext(io: CliIo, state: { exitCode: number }): CliContext {
  const sessions = sessionsOf(io);
  const context: CliContext = {
    io,
    globalsOf: (command) => command.optsWithGlobals<GlobalFlags>(),
    withTarget: async (command, work, workspace) => {
      const globals = context.globalsOf(command);
      const root =
        workspace ??
        (globals.dir !== undefined ? resolve(io.cwd, globals.dir) : await locateWorkspace(io.cwd));
      const session = sessionOf(command);
      const patterns = globals.redactPattern ?? [];
      const protections = {
        ...((globals.redact || patterns.length > 0) && {
          redact: { headers: globals.redact === true, patterns },
        }),
        ...(globals.blockPrivate && { blockPrivate: true }),
      };
      let opened: Promise<Session> | undefined;
      // Another process holds the workspace: said after a second, never waited in silence.
      const onLockWait = globals.quiet
        ? undefined
        : (wait: LockWait) => io.stderr(`rewind: ${wait.message}\n`);
      // So is a recovery that may take a while, before it starts: what it came to is said after.
      const onRecoveryStart = globals.quiet
        ? undefined
        : (message: string) => io.stderr(`rewind: ${message}\n`);
      const progressLine =
        io.isErrorTerminal === true && !globals.quiet && !globals.json
          ? createProgressLine(io.stderr)
          : undefined;
      const target: OperationTarget = {
        workspace: root,
        session: () => {
          opened ??= sessions.open({
            workspace: root,
            ...(session !== undefined && { session }),
            ...protections,
            ...(onLockWait && { onLockWait }),
            ...(onRecoveryStart && { onRecoveryStart }),
          });
          return opened;
        },
        sessionId: async () => session,
        protections,
        resolveFile: async (path) => resolve(io.cwd, path),
        defaults: {},
        ...(progressLine && { progress: progressLine.report }),
        ...(onLockWait && { onLockWait }),
      };
      try {
        return await work(target);
      } finally {
        progressLine?.end();
        const session = opened && (await opened.catch(() => undefined));
        // What was finished or closed first is said, even when the command then failed.
        if (!globals.quiet && session) {
          for (const recovered of sessions.recoveriesToSay(session)) {
            io.stderr(`rewind: ${recovered}\n`);
          }
        }
        if (session) await sessions.release(session);
      }
    },
    run: async (command, target, operation, input) => {
      const checked = checkInput(operation, input);
      if (checked.problem) throw usageErrorOf(command, checked.problem, input);
      // A call through a type parameter resolves to the widest row's run; O's own says the output.
      return operation.run(target, checked.input) as Promise<OutputOf<typeof operation>>;
    },
    emit: (command, output, presenter) => {
      const globals = context.globalsOf(command);
      if (globals.json) {
        const document = boundLists(presenter.json ? presenter.json(output) : output);
        io.stdout(`${JSON.stringify(document, jsonReplacer, 2)}\n`);
      } else {
        const passed = presenter.passthrough?.(output, globals);
        if (passed?.stdout) io.stdout(passed.stdout);
        if (passed?.stderr) io.stderr(passed.stderr);
        const text = presenter.text(output, { ...globals, isColor: isColorWanted(io) });
        // A name that is not UTF-8 shows its odd bytes as \xHH, not as replacement characters.
        if (text) io.stdout(displayPath(text));
      }
      if (!globals.quiet) {
        for (const warning of presenter.warnings?.(output) ?? []) {
          io.stderr(`rewind: warning: ${displayPath(warning)}\n`);
        }
      }
      const exitCode = presenter.exitCode?.(output);
      if (exitCode !== undefined) state.exitCode = exitCode;
    },
    perform: async (command, operation, input, presenter, workspace) => {
      const output = await context.withTarget(
        command,
        (target) => context.run(command, target, operation, input),
        workspace,
      );
      context.emit(command, output, presenter);
    },
    confirm: async (command, isYes, question) => {
      if (isYes) return true;
      if (!io.prompt || context.globalsOf(command).json) {
        throw new UsageError('Nobody can confirm here: add --yes to run it.');
      }
      return /^y(es)?$/i.test((await io.prompt(`${question} [y/N] `)).trim());
    },
    setExitCode: (code) => {
      state.exitCode = code;
    },
  };
  return context;
}
