/**
 * The Rewind MCP server: one tool per operation of the table that MCP offers, each answering with
 * the text a model sees (present.ts), in one session opened on first use.
 */
import { McpServer } from '@modelcontextprotocol/server';
import {
  type ExecResult,
  init,
  isRewindError,
  type OpenSessionOptions,
  openSession,
  REWIND_VERSION,
  RewindError,
  resolveWorkspacePath,
  type Session,
  startIsolatedSession,
  status,
} from '../index.js';
import {
  type AnyOperation,
  OPERATIONS,
  type OperationAnnotations,
  type OperationTarget,
  structuredOutputOf,
} from '../operations/index.js';
import { presenterOf, presentFailure } from './present.js';
import { SessionHolder } from './session-holder.js';

/** Options of {@link createMcpServer}. */
export interface McpServerOptions {
  /** The workspace the agent works in; a store is created there if it has none. */
  root: string;
  /** How the session is opened: isolation, sandbox, network, redaction, block-private. */
  session?: Omit<OpenSessionOptions, 'workspace'>;
  /** Default command timeout for `exec`, ms. */
  execTimeoutMs?: number;
  /** Default request timeout for `http`, ms. */
  httpTimeoutMs?: number;
  /**
   * A store this server creates starts a hash-chained session; on a store whose current session
   * is not hash-chained, every tool call is refused, saying how to start one.
   */
  hashChain?: boolean;
  /** Put before every tool name (`rewind_` gives `rewind_write`), for clients that mix servers. */
  toolPrefix?: string;
  /**
   * The session to work in, for servers that share one ({@link sharedSessionOf}): opened by
   * whoever made them, and left open when a server closes. Without it, the server opens its own.
   */
  sharedSession?: SessionHolder;
}

/** What every client is told about the server as it connects: how its tools fit together. */
export const SERVER_INSTRUCTIONS = `Rewind makes your changes to this workspace cheap to take back.
- Every file tool (write, delete, move, mkdir) and every command (exec) is journaled as an action with an id; undo takes one back unless a later edit would be trampled (it then lists the paths). An undo is an action too.
- Before risky work, checkpoint with a label (and your conversation as messages, so a rollback brings both back). rollback restores files and conversation together, and can itself be undone; use dryRun first to see what would change, scope to restore only the files or only the conversation.
- test runs the workspace's verifier and gives pass, fail or unknown; a fail means: fix it, or roll back.
- log, show, diff, checkpoints, read, list and conversation-show only read.
- What cannot be undone (http requests with side effects, commands outside the workspace) is journaled too, and may be left as a draft for a person to approve.
Paths are relative to the workspace root; .rewind/ is Rewind's own and is never read or written by these tools.`;

/** The tool name prefix's shape: MCP tool names are letters, digits, "_", "-" and ".". */
const TOOL_PREFIX = /^[A-Za-z0-9_.-]{1,32}$/;

/** Marks the isolated sessions this server starts, so that the next start finds them again. */
const STARTED_BY_MCP = 'mcp';

/**
 * The isolated session a server with `isolation: isolated` works in: the newest one `rewind mcp`
 * started on this store whose view is still there (uncommitted work is never stranded by a
 * restart), else a new one. The store's current session stays what it was, so that a person's
 * commands in the workspace never land in the agent's view.
 */
async function openIsolated(options: McpServerOptions): Promise<Session> {
  const mine = (await status({ workspace: options.root })).sessions
    .filter((session) => session.isolation === 'isolated' && session.startedBy === STARTED_BY_MCP)
    // Newest first, by the bytes of their ISO timestamps (no collator to set up: ~9 ms).
    .sort((a, b) => {
      const [x, y] = [String(a.startedAt), String(b.startedAt)];
      return x < y ? 1 : x > y ? -1 : 0;
    });
  for (const session of mine) {
    if (session.unsupported) continue;
    let resumed: Session;
    try {
      resumed = await openSession({
        ...options.session,
        workspace: options.root,
        session: session.id,
      });
    } catch (error) {
      // Its view was destroyed: look further, else start another.
      if (!isRewindError(error, 'SESSION_NOT_FOUND')) throw error;
      continue;
    }
    const refusal = unchainedRefusal(
      options,
      session,
      'its isolated session',
      `Commit its work (\`rewind commit --session ${session.id}\`) and destroy it (\`rewind destroy --session ${session.id}\`), then restart the server`,
    );
    if (refusal) {
      await resumed.close();
      throw refusal;
    }
    return resumed;
  }
  return startIsolatedSession({
    ...options.session,
    workspace: options.root,
    startedBy: STARTED_BY_MCP,
    makeCurrent: false,
    ...(options.hashChain === true && { hashChain: true }),
  });
}

/** The session a server made with `options` works in: see {@link createMcpServer}. */
function openServerSession(options: McpServerOptions): Promise<Session> {
  return options.session?.isolation === 'isolated'
    ? openIsolated(options)
    : openSession({ workspace: options.root, ...options.session });
}

/**
 * The session that the servers made with `options` share, kept open (watching) until its
 * `close`: `rewind mcp --http` makes a server per request, and each opening its own would start a
 * watch for one call (which costs a start and answers nothing) and, isolated, concurrent first
 * calls would each start a session.
 */
export function sharedSessionOf(options: McpServerOptions): SessionHolder {
  return new SessionHolder(() => openServerSession(options));
}

/**
 * Runs an operation; a call that changes something (`isToolCall`) runs as a tool call of the
 * session when it has policies on (`policy-set`): a checkpoint first, and a failure rolled back
 * under the rollback policy, answered with `ERROR: ...` and what was rolled back.
 */
async function runWithPolicies(
  operation: AnyOperation,
  target: OperationTarget,
  input: unknown,
): Promise<{ output: unknown } | { failure: string; output?: unknown }> {
  const run = () => operation.run(target, input as never);
  if (operation.isToolCall !== true) return { output: await run() };
  const session = await target.session();
  const { autoCheckpoint, autoRollback } = session.policies();
  if (!autoCheckpoint && !autoRollback) return { output: await run() };
  // A command that fails (a non-zero exit, a signal, a timeout) is a failed call, as it is for
  // `session.run`: thrown inside the tool call, so that the rollback policy rolls it back. Its
  // output is still shown, before what was rolled back.
  let failed: unknown;
  const work = async () => {
    const output = await run();
    if (isFailedCommand(output)) {
      failed = output;
      const how = output.timedOut
        ? 'timed out'
        : output.signal !== null
          ? `ended by ${output.signal}`
          : `exit ${output.exitCode}`;
      throw new RewindError('COMMAND_FAILED', `Command failed (${how}): ${output.target}`);
    }
    return output;
  };
  const output = await session.tool(work, { name: operation.name })();
  if (typeof output !== 'string') return { output };
  return failed === undefined ? { failure: output } : { failure: output, output: failed };
}

/** `result` with `notice` (see {@link SessionHolder.takeNotice}) as its first text, when there is one. */
function withNotice<T extends { content: readonly { type: string }[] }>(
  notice: string | undefined,
  result: T,
): T {
  if (notice === undefined) return result;
  return { ...result, content: [{ type: 'text', text: notice }, ...result.content] };
}

/** Whether `output` is what a command that failed returns (`exec`'s result, state `failed`). */
function isFailedCommand(output: unknown): output is ExecResult {
  return (
    typeof output === 'object' &&
    output !== null &&
    (output as { kind?: unknown }).kind === 'exec' &&
    (output as { state?: unknown }).state === 'failed'
  );
}

/**
 * The refusal to work in `session` when the server was asked for a hash chain and it has none,
 * saying `what` it is and `how` to get one.
 */
function unchainedRefusal(
  options: McpServerOptions,
  session: { id: string; isHashChained: boolean } | undefined,
  what: string,
  how: string,
): RewindError | undefined {
  if (options.hashChain !== true || !session || session.isHashChained) return undefined;
  return new RewindError(
    'INVALID_ARGUMENT',
    `The server was started with --hash-chain, but ${what} ${session.id} is not hash-chained. ${how}, or leave --hash-chain out.`,
    { data: { session: session.id } },
  );
}

/** An operation's annotations as MCP tool hints, every one stated. */
function toolAnnotationsOf(annotations: OperationAnnotations) {
  const isReadOnly = annotations.readOnly === true;
  return {
    readOnlyHint: isReadOnly,
    destructiveHint: annotations.destructive === true,
    idempotentHint: annotations.idempotent ?? isReadOnly,
    openWorldHint: annotations.openWorld === true,
  };
}

const settled = new WeakMap<McpServer, () => Promise<void>>();

/**
 * Resolves once no tool call of `server` is running: a shutdown waits for it, so a call in
 * flight ends as it would have (journaled and closed), whatever the client did.
 */
export function whenIdle(server: McpServer): Promise<void> {
  return settled.get(server)?.() ?? Promise.resolve();
}

/**
 * The Rewind MCP server: journaled file tools, commands and requests, checkpoints, rollback,
 * the conversation, the verifier and the ledger, as tools with the same names and inputs as the
 * CLI's commands. One session, opened (and the store created) on first use.
 */
export function createMcpServer(options: McpServerOptions): McpServer {
  const prefix = options.toolPrefix ?? '';
  if (prefix !== '' && !TOOL_PREFIX.test(prefix)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `A tool prefix is 1 to 32 letters, digits, "_", "-" or ".", not ${JSON.stringify(prefix)}.`,
      { data: { prefix } },
    );
  }
  const server = new McpServer(
    { name: 'rewind', version: REWIND_VERSION },
    { instructions: SERVER_INSTRUCTIONS },
  );
  let stored: Promise<unknown> | undefined;
  // What protects the session (redaction, private addresses refused) is recorded in a session
  // init starts, and added to one the server opens: it belongs to the session from then on.
  const protections = {
    ...(options.session?.redact && { redact: options.session.redact }),
    ...(options.session?.blockPrivate === true && { blockPrivate: true }),
  };
  // init is idempotent: a workspace with a store keeps it and its current session.
  const ready = () =>
    (stored ??= init({
      workspace: options.root,
      ...protections,
      ...(options.hashChain === true && { hashChain: true }),
    }).then(async () => {
      // An isolated server works in a session of its own, checked as it is opened.
      if (options.hashChain !== true || options.session?.isolation === 'isolated') return;
      const { sessions } = await status({ workspace: options.root });
      const refusal = unchainedRefusal(
        options,
        sessions.find((session) => session.isCurrent),
        'the current session',
        'Start one with `rewind session new --hash-chain` and restart the server',
      );
      if (refusal) throw refusal;
    }));
  const holder = options.sharedSession ?? new SessionHolder(() => openServerSession(options));
  const target: OperationTarget = {
    workspace: options.root,
    protections,
    session: () => ready().then(() => holder.session()),
    // The server works in one session for its whole life: naming it means opening it, once.
    sessionId: async () => (await target.session()).id,
    // A model names files of the workspace it sees, never of the host around it.
    resolveFile: async (path) => resolveWorkspacePath((await target.session()).workspace, path),
    defaults: { execTimeoutMs: options.execTimeoutMs, httpTimeoutMs: options.httpTimeoutMs },
  };
  let running = 0;
  const idle: (() => void)[] = [];
  settled.set(server, () =>
    running === 0 ? Promise.resolve() : new Promise<void>((done) => idle.push(done)),
  );
  const operations: readonly AnyOperation[] = OPERATIONS;
  for (const operation of operations) {
    if (operation.excludedFrom?.mcp !== undefined) continue;
    const present = presenterOf(operation.name);
    const structured = structuredOutputOf(operation.name);
    server.registerTool(
      `${prefix}${operation.name}`,
      {
        title: operation.title,
        description: operation.description,
        inputSchema: operation.input,
        outputSchema: structured.schema,
        annotations: toolAnnotationsOf(operation.annotations),
      },
      async (input) => {
        running += 1;
        try {
          await ready();
          const ran = await runWithPolicies(operation, target, input);
          if ('failure' in ran) {
            const shown = ran.output === undefined ? [] : present(ran.output, input).content;
            const failed = { content: [...shown, { type: 'text' as const, text: ran.failure }] };
            return withNotice(holder.takeNotice(), { ...failed, isError: true });
          }
          const { output } = ran;
          const answered = {
            ...present(output, input),
            structuredContent: structured.of(output, input),
          };
          return withNotice(holder.takeNotice(), answered);
        } catch (error) {
          return withNotice(holder.takeNotice(), presentFailure(error));
        } finally {
          running -= 1;
          if (running === 0) for (const done of idle.splice(0)) done();
        }
      },
    );
  }
  // Closing the server closes the session it opened (its ledger file handle, its watcher); a
  // shared one is its maker's to close.
  const close = server.close.bind(server);
  server.close = async () => {
    await close();
    if (!options.sharedSession) await holder.close();
  };
  return server;
}
