/**
 * The Rewind MCP server: one tool per operation of the table that MCP offers, each answering with
 * the text a model sees (present.ts), in one session opened on first use.
 */
import { McpServer } from '@modelcontextprotocol/server';
import {
  init,
  type OpenSessionOptions,
  openSession,
  REWIND_VERSION,
  resolveWorkspacePath,
  type Session,
} from '../index.js';
import {
  type AnyOperation,
  OPERATIONS,
  type OperationAnnotations,
  type OperationTarget,
} from '../operations/index.js';
import { presenterOf, presentFailure } from './present.js';

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
  const server = new McpServer({ name: 'rewind', version: REWIND_VERSION });
  let stored: Promise<unknown> | undefined;
  // What protects the session (redaction, private addresses refused) is recorded in a session
  // init starts, and added to one the server opens: it belongs to the session from then on.
  const protections = {
    ...(options.session?.redact && { redact: options.session.redact }),
    ...(options.session?.blockPrivate === true && { blockPrivate: true }),
  };
  // init is idempotent: a workspace with a store keeps it and its current session.
  const ready = () => (stored ??= init({ workspace: options.root, ...protections }));
  let opened: Promise<Session> | undefined;
  const target: OperationTarget = {
    workspace: options.root,
    protections,
    session: () => {
      opened ??= ready().then(() => openSession({ workspace: options.root, ...options.session }));
      return opened;
    },
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
    server.registerTool(
      operation.name,
      {
        title: operation.title,
        description: operation.description,
        inputSchema: operation.input,
        annotations: toolAnnotationsOf(operation.annotations),
      },
      async (input) => {
        running += 1;
        try {
          await ready();
          return present(await operation.run(target, input), input);
        } catch (error) {
          return presentFailure(error);
        } finally {
          running -= 1;
          if (running === 0) for (const done of idle.splice(0)) done();
        }
      },
    );
  }
  // Closing the server closes the session it opened (its ledger file handle).
  const close = server.close.bind(server);
  server.close = async () => {
    await close();
    if (opened) await (await opened.catch(() => undefined))?.close();
  };
  return server;
}
