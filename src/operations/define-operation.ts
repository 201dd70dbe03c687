/**
 * The shape of one operation: named once for every surface (the CLI command, the MCP tool, the
 * framework adapters' tools), with its input schema and the one call it makes.
 */
import * as z from 'zod';
import type { LockWait, RedactionOptions, Session } from '../index.js';

/** What an operation acts on, as the edge that runs it provides it. */
export interface OperationTarget {
  /** The workspace root: the directory that holds (or will hold) `.rewind/`. */
  readonly workspace: string;
  /** The session the caller works in: opened by the edge on first call, and closed by it. */
  session(): Promise<Session>;
  /**
   * The session the caller named (an id, a unique prefix or a ledger file name), without opening
   * it; undefined for the current one. Store-level reads and notes use this, since opening a
   * session takes the workspace lock and finishes what a killed process left half-done.
   */
  sessionId(): Promise<string | undefined>;
  /**
   * The absolute path of a file the caller names outside the journaled workspace paths (a note's
   * attachment). A person's edge resolves it against the current directory; an agent's edge keeps
   * it inside the workspace.
   */
  resolveFile(path: string): Promise<string>;
  /**
   * What the edge was asked to protect sessions with (`--redact`, `--redact-pattern`,
   * `--block-private`): recorded in a session it starts, added to one it opens. They belong to
   * the session from then on; nothing takes them away.
   */
  readonly protections?: { readonly redact?: RedactionOptions; readonly blockPrivate?: boolean };
  /** Defaults the edge was started with; undefined leaves the library's (120 s, 30 s). */
  readonly defaults: { readonly execTimeoutMs?: number; readonly httpTimeoutMs?: number };
  /** Where a long operation says how it is going, when the edge shows progress. */
  readonly progress?: (event: ProgressEvent) => void;
  /**
   * Told when the operation has waited a second for the workspace lock another process holds,
   * and again when that changes: for the operations that take the lock themselves rather than
   * through {@link session} (gc, a note with attachments).
   */
  readonly onLockWait?: (wait: LockWait) => void;
}

/** How a long operation is going: files read by a checkpoint, paths set by a rollback or commit. */
export interface ProgressEvent {
  readonly step: 'reading' | 'restoring' | 'committing';
  readonly done: number;
  readonly total: number;
}

/**
 * What an operation does to the world, for a client deciding whether to ask first. Omitted
 * members are false, except `idempotent`, which follows `readOnly`.
 */
export interface OperationAnnotations {
  readonly readOnly?: boolean;
  readonly destructive?: boolean;
  readonly idempotent?: boolean;
  readonly openWorld?: boolean;
}

/** The surfaces that leave an operation out, each with the reason, for people to read. */
export interface Exclusions {
  readonly cli?: string;
  readonly mcp?: string;
}

/** A surface an operation can be built on. */
export type Surface = keyof Exclusions;

/** One operation, named once for every surface. */
export interface Operation<
  Name extends string = string,
  Input extends z.ZodObject = z.ZodObject,
  Output = unknown,
  Excluded extends Exclusions = Exclusions,
> {
  /** Kebab-case. With a group prefix it is a CLI subcommand: `conversation-sync` is `rewind conversation sync`. */
  readonly name: Name;
  /** For people: the MCP tool's title. */
  readonly title: string;
  /** One line for `rewind --help`. */
  readonly summary: string;
  /** For a model: when to use it, what it returns, how it is taken back. */
  readonly description: string;
  /** The input's shape. Checks the library makes (labels, paths, ids) stay in the library. */
  readonly input: Input;
  /** `session`: it works in one session, which the caller may name; `workspace`: on the store as a whole. */
  readonly scope: 'session' | 'workspace';
  /**
   * A call an agent makes to change something (a file, a command, a request). When the session
   * has policies on (`policy-set`), the MCP server runs it as a tool call: an automatic checkpoint
   * first, and a failure rolled back under the rollback policy.
   */
  readonly isToolCall?: boolean;
  readonly annotations: OperationAnnotations;
  readonly excludedFrom?: Excluded;
  run(target: OperationTarget, input: z.output<Input>): Promise<Output>;
}

/** Any operation, whatever its input and output. */
export type AnyOperation = Operation<string, z.ZodObject, unknown, Exclusions>;

/** What an operation's `run` takes, once its schema has checked it. */
export type InputOf<O extends AnyOperation> = z.output<O['input']>;

/** What an operation's `run` resolves with. */
export type OutputOf<O extends AnyOperation> = Awaited<ReturnType<O['run']>>;

/** The operations of a union that `surface` does not leave out. */
export type OperationOn<O extends AnyOperation, S extends Surface> =
  O extends Operation<string, z.ZodObject, unknown, infer Excluded>
    ? S extends keyof Excluded
      ? never
      : O
    : never;

/** What {@link defineOperation} takes: an operation whose input schema is made by a function. */
export type OperationDefinition<
  Name extends string,
  Input extends z.ZodObject,
  Output,
  Excluded extends Exclusions,
> = Omit<Operation<Name, Input, Output, Excluded>, 'input'> & {
  /** Makes the input's shape: called once, the first time a surface asks for it. */
  input(): Input;
};

/**
 * Declares an operation. The name, the input and the output types, and which surfaces leave it
 * out, are kept in the row's type. Its input schema is made the first time it is asked for, not
 * as the table loads: a `rewind` command uses one operation's, and making every operation's zod
 * schemas cost each command a few milliseconds as it started (docs/performance.md).
 */
export function defineOperation<
  const Name extends string,
  Input extends z.ZodObject,
  Output,
  const Excluded extends Exclusions = Record<never, never>,
>(
  definition: OperationDefinition<Name, Input, Output, Excluded>,
): Operation<Name, Input, Output, Excluded> {
  const { input: make, ...operation } = definition;
  let input: Input | undefined;
  return {
    ...operation,
    get input() {
      input ??= make();
      return input;
    },
  };
}

/** The first thing wrong with an input: the input key it is about (none for a rule across keys) and what is wrong. */
export interface InputProblem {
  readonly key: string | undefined;
  /** A predicate for a key (`must be a positive number of seconds`), a sentence otherwise. */
  readonly message: string;
}

/**
 * Checks `input` against the operation's schema: the input as `run` takes it (defaults applied),
 * or the first problem. Never throws.
 */
export function checkInput<O extends AnyOperation>(
  operation: O,
  input: unknown,
): { input: InputOf<O>; problem?: undefined } | { input?: undefined; problem: InputProblem } {
  const parsed = operation.input.safeParse(input);
  if (parsed.success) return { input: parsed.data as InputOf<O> };
  const issue = parsed.error.issues[0];
  const key = issue?.path[0];
  return {
    problem: {
      key: typeof key === 'string' ? key : undefined,
      message: issue?.message ?? 'is not valid',
    },
  };
}

/** The values an input key takes when it is one of a few (`sandbox`: bwrap, none, auto), else undefined. */
export function choicesOf(operation: AnyOperation, key: string): readonly string[] | undefined {
  let schema: unknown = operation.input.shape[key];
  while (schema instanceof z.ZodOptional || schema instanceof z.ZodDefault)
    schema = schema.unwrap();
  return schema instanceof z.ZodEnum ? schema.options.map(String) : undefined;
}

/** What a caller gives an operation, before its schema checks it and applies defaults. */
export type GivenInputOf<O extends AnyOperation> = z.input<O['input']>;
