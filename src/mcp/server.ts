import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import {
  type ActionResult,
  formatVerification,
  init,
  isRewindError,
  log,
  type OpenSessionOptions,
  openSession,
  REWIND_VERSION,
  type Session,
} from '../index.js';

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

type ToolResult = { content: { type: 'text'; text: string }[]; isError?: boolean };

const text = (value: string): ToolResult => ({ content: [{ type: 'text', text: value }] });

/** Every response that creates an action names it and how to take it back. */
function journaled(result: ActionResult, detail = ''): ToolResult {
  const how =
    result.state === 'draft'
      ? `a draft: a person runs it with \`rewind approve ${result.id}\`, or drops it with \`rewind discard ${result.id}\``
      : result.class === 'reversible'
        ? `reversible: rewind undo ${result.id}`
        : result.class === 'compensable'
          ? `compensable: rewind compensate ${result.id}`
          : 'irreversible';
  return text(`${detail}${detail ? '\n' : ''}journaled as action #${result.id} (${how})`);
}

/** A failure as the model should see it: what went wrong and what to do next. */
function failure(error: unknown): ToolResult {
  const message = isRewindError(error)
    ? `${error.message} [${error.code}]`
    : `Unexpected error: ${error instanceof Error ? error.message : String(error)}`;
  return { content: [{ type: 'text', text: message }], isError: true };
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
 * the conversation, the verifier and the ledger, as tools with the same names as the CLI's
 * commands. One session, opened (and the store created) on first use.
 */
export function createMcpServer(options: McpServerOptions): McpServer {
  const server = new McpServer({ name: 'rewind', version: REWIND_VERSION });
  let opened: Promise<Session> | undefined;
  const session = (): Promise<Session> => {
    opened ??= (async () => {
      // init is idempotent: a workspace with a store keeps it and its current session.
      await init({ workspace: options.root });
      return openSession({ workspace: options.root, ...options.session });
    })();
    return opened;
  };
  let running = 0;
  const idle: (() => void)[] = [];
  const handle =
    <A>(fn: (args: A, current: Session) => Promise<ToolResult>) =>
    async (args: A): Promise<ToolResult> => {
      running += 1;
      try {
        return await fn(args, await session());
      } catch (error) {
        return failure(error);
      } finally {
        running -= 1;
        if (running === 0) for (const done of idle.splice(0)) done();
      }
    };
  settled.set(server, () =>
    running === 0 ? Promise.resolve() : new Promise<void>((done) => idle.push(done)),
  );
  const path = z
    .string()
    .min(1)
    .describe('A path relative to the workspace root, such as "src/index.ts".');
  const mutating = {
    readOnlyHint: false,
    destructiveHint: true,
    idempotentHint: false,
    openWorldHint: false,
  };
  const reading = {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  };

  server.registerTool(
    'write',
    {
      title: 'Write a file (journaled, undoable)',
      description:
        'Create or overwrite a file in the workspace, creating missing directories. The previous content is kept, so the write can be undone. Prefer this to writing files any other way.',
      inputSchema: z.object({
        path,
        content: z.string().describe('The whole new content of the file.'),
      }),
      annotations: mutating,
    },
    handle(async ({ path: target, content }: { path: string; content: string }, current) =>
      journaled(await current.write(target, content)),
    ),
  );
  server.registerTool(
    'delete',
    {
      title: 'Delete a file or directory tree (journaled, undoable)',
      description:
        'Delete a file, a symbolic link or a whole directory. Everything is kept, so it can be undone.',
      inputSchema: z.object({ path }),
      annotations: mutating,
    },
    handle(async ({ path: target }: { path: string }, current) =>
      journaled(await current.delete(target)),
    ),
  );
  server.registerTool(
    'move',
    {
      title: 'Move or rename (journaled, undoable)',
      description:
        'Move or rename a file or directory. The destination must be free (or a file, when moving a file).',
      inputSchema: z.object({ from: path, to: path }),
      annotations: mutating,
    },
    handle(async ({ from, to }: { from: string; to: string }, current) =>
      journaled(await current.move(from, to)),
    ),
  );
  server.registerTool(
    'mkdir',
    {
      title: 'Create a directory (journaled, undoable)',
      description: 'Create a directory and its missing parents.',
      inputSchema: z.object({ path }),
      annotations: { ...mutating, destructiveHint: false },
    },
    handle(async ({ path: target }: { path: string }, current) =>
      journaled(await current.mkdir(target)),
    ),
  );
  server.registerTool(
    'read',
    {
      title: 'Read a file',
      description: 'Read a text file of the workspace (not journaled).',
      inputSchema: z.object({ path }),
      annotations: reading,
    },
    handle(async ({ path: target }: { path: string }, current) => text(await current.read(target))),
  );
  server.registerTool(
    'list',
    {
      title: 'List a directory',
      description:
        'List the entries of a workspace directory, directories marked with a trailing "/" (not journaled).',
      inputSchema: z.object({
        path: z
          .string()
          .default('.')
          .describe('A directory relative to the workspace root; "." for the root.'),
      }),
      annotations: reading,
    },
    handle(async ({ path: target }: { path: string }, current) =>
      text((await current.list(target)).join('\n') || '(empty)'),
    ),
  );
  server.registerTool(
    'exec',
    {
      title: 'Run a command (journaled; its file changes are undoable)',
      description:
        'Run a shell command in the workspace. The files it creates, modifies and deletes are recorded and can be undone. With draft: true it is only journaled, and a person approves it.',
      inputSchema: z.object({
        command: z.string().min(1).describe('The command, run by /bin/sh -c.'),
        timeoutSeconds: z.number().positive().optional(),
        draft: z
          .boolean()
          .optional()
          .describe('Journal it for a person to approve instead of running it.'),
      }),
      annotations: { ...mutating, openWorldHint: true },
    },
    handle(
      async (
        {
          command,
          timeoutSeconds,
          draft,
        }: { command: string; timeoutSeconds?: number; draft?: boolean },
        current,
      ) => {
        const timeoutMs =
          timeoutSeconds !== undefined ? Math.round(timeoutSeconds * 1000) : options.execTimeoutMs;
        if (draft)
          return journaled(
            await current.exec(command, { draft: true, ...(timeoutMs && { timeoutMs }) }),
          );
        const result = await current.exec(command, { ...(timeoutMs && { timeoutMs }) });
        const ended = result.timedOut
          ? 'timed out'
          : result.signal
            ? `ended by ${result.signal}`
            : `exit ${result.exitCode}`;
        return journaled(
          result,
          `${result.stdout}${result.stderr ? `\n[stderr]\n${result.stderr}` : ''}\n${ended}: ${result.created.length} created, ${result.modified.length} modified, ${result.deleted.length} deleted`,
        );
      },
    ),
  );
  server.registerTool(
    'http',
    {
      title: 'Send an HTTP request (journaled; irreversible)',
      description:
        'Send an HTTP request. Cloud metadata, link-local and reserved addresses are refused. It cannot be undone; with draft: true a person approves it first.',
      inputSchema: z.object({
        method: z.string().min(1),
        url: z.string().min(1),
        headers: z.record(z.string(), z.string()).optional(),
        body: z.string().optional(),
        draft: z.boolean().optional(),
      }),
      annotations: { ...mutating, openWorldHint: true },
    },
    handle(
      async (
        args: {
          method: string;
          url: string;
          headers?: Record<string, string>;
          body?: string;
          draft?: boolean;
        },
        current,
      ) => {
        const result = await current.http(
          {
            method: args.method,
            url: args.url,
            ...(args.headers && { headers: args.headers }),
            ...(args.body !== undefined && { body: args.body }),
          },
          {
            ...(args.draft && { draft: true }),
            ...(options.httpTimeoutMs && { timeoutMs: options.httpTimeoutMs }),
          },
        );
        return journaled(
          result,
          result.response ? `HTTP ${result.response.status}\n${result.response.body}` : '',
        );
      },
    ),
  );
  server.registerTool(
    'record',
    {
      title: 'Record an external action before doing it',
      description:
        'Journal something you are about to do outside the workspace (a deploy, an email), with a command that would undo it if there is one. Report its outcome with the report tool.',
      inputSchema: z.object({
        name: z.string().min(1).describe('What it is, such as deploy.'),
        compensateCommand: z.string().optional().describe('A shell command that would offset it.'),
        detail: z.string().optional(),
        draft: z.boolean().optional(),
      }),
      annotations: { ...mutating, destructiveHint: false, openWorldHint: true },
    },
    handle(
      async (
        args: { name: string; compensateCommand?: string; detail?: string; draft?: boolean },
        current,
      ) =>
        journaled(
          await current.record(args.name, {
            ...(args.compensateCommand && { compensation: { command: args.compensateCommand } }),
            ...(args.detail !== undefined && { detail: args.detail }),
            ...(args.draft && { draft: true }),
          }),
        ),
    ),
  );
  server.registerTool(
    'report',
    {
      title: 'Report the outcome of a recorded action',
      description: 'Close an action journaled with record: did it succeed?',
      inputSchema: z.object({
        id: z.number().int().positive(),
        ok: z.boolean(),
        detail: z.string().optional(),
      }),
      annotations: { ...mutating, destructiveHint: false },
    },
    handle(async ({ id, ok, detail }: { id: number; ok: boolean; detail?: string }, current) =>
      journaled(await current.report(id, { ok, ...(detail !== undefined && { detail }) })),
    ),
  );
  server.registerTool(
    'checkpoint',
    {
      title: 'Checkpoint the workspace',
      description:
        'Record the workspace (and the conversation, if synced) under a label to roll back to later.',
      inputSchema: z.object({
        label: z
          .string()
          .min(1)
          .describe('Letters, digits, ".", "_", "-", such as before-refactor.'),
      }),
      annotations: { ...mutating, destructiveHint: false },
    },
    handle(async ({ label }: { label: string }, current) => {
      const result = await current.checkpoint(label);
      return text(
        `checkpoint ${result.label} (#${result.seq}): ${result.fileCount} files; ${result.added} added, ${result.modified} modified, ${result.deleted} deleted since the previous one`,
      );
    }),
  );
  server.registerTool(
    'rollback',
    {
      title: 'Roll back to a checkpoint (undoable)',
      description:
        'Restore the workspace (and the conversation, if the checkpoint has one) to a checkpoint. The current state is saved first, so the rollback can be undone. Returns the restored conversation when there is one.',
      inputSchema: z.object({ label: z.string().min(1), patchNote: z.string().optional() }),
      annotations: mutating,
    },
    handle(async ({ label, patchNote }: { label: string; patchNote?: string }, current) => {
      const result = await current.rollback(label, { ...(patchNote && { patchNote }) });
      const conversation = result.conversation
        ? `\nrestored conversation:\n${JSON.stringify(result.conversation.messages)}`
        : '';
      return text(
        `rolled back to ${result.label}: ${result.applied?.written ?? 0} written, ${result.applied?.created ?? 0} created, ${result.applied?.deleted ?? 0} deleted; journaled as action #${result.id} (reversible: rewind undo ${result.id})${conversation}`,
      );
    }),
  );
  server.registerTool(
    'conversation-sync',
    {
      title: 'Record the conversation',
      description:
        "Record your conversation (a JSON array of messages in your provider's format) so checkpoints and rollbacks include it.",
      inputSchema: z.object({
        messages: z.array(z.record(z.string(), z.unknown())),
        format: z.string().optional(),
      }),
      annotations: { ...mutating, destructiveHint: false, idempotentHint: true },
    },
    handle(
      async (
        { messages, format }: { messages: Record<string, unknown>[]; format?: string },
        current,
      ) => {
        const result = await current.syncConversation(messages, {
          ...(format && { format: format as never }),
        });
        return text(
          result.isChanged
            ? `recorded ${result.messageCount} ${result.format} messages`
            : 'unchanged; nothing recorded',
        );
      },
    ),
  );
  server.registerTool(
    'test',
    {
      title: 'Run the verifier',
      description:
        "Run the workspace's verifier (tests) and get its verdict: pass, fail or unknown.",
      inputSchema: z.object({}),
      annotations: { ...reading, idempotentHint: false },
    },
    handle(async (_args: Record<string, never>, current) => {
      const result = await current.test();
      return text(`${result.status.toUpperCase()}: ${formatVerification(result)}`);
    }),
  );
  server.registerTool(
    'status',
    {
      title: 'Session status',
      description:
        'Where the session works, its sandbox, and for an isolated session what a commit would do.',
      inputSchema: z.object({}),
      annotations: reading,
    },
    handle(async (_args: Record<string, never>, current) =>
      text(JSON.stringify(await current.status(), null, 2)),
    ),
  );
  server.registerTool(
    'log',
    {
      title: 'The session ledger',
      description:
        "The timeline of what was done, with each action's id, class and state. Filter by kind (action, verification...).",
      inputSchema: z.object({
        kind: z.string().optional(),
        last: z.number().int().positive().optional(),
      }),
      annotations: reading,
    },
    handle(async ({ kind, last }: { kind?: string; last?: number }, current) => {
      const report = await log({
        workspace: current.hostWorkspace,
        session: current.id,
        ...(kind && { kind }),
      });
      const lines = report.entries.map(
        (line) =>
          `#${line.seq} ${line.kind} ${line.summary}${line.action ? ` [${line.action.state}]` : ''}`,
      );
      return text(lines.slice(-(last ?? 50)).join('\n'));
    }),
  );
  server.registerTool(
    'diff',
    {
      title: 'Show changes',
      description:
        'What an action changed (give its id), or what changed since a checkpoint (give its label).',
      inputSchema: z.object({ from: z.string().min(1), to: z.string().optional() }),
      annotations: reading,
    },
    handle(async ({ from, to }: { from: string; to?: string }, current) => {
      const result = await current.diff(from, to);
      return text(result.text || `No differences between ${result.from} and ${result.to}.`);
    }),
  );
  server.registerTool(
    'undo',
    {
      title: 'Undo an action',
      description:
        'Undo a reversible action by id (or the last one). Refused, with each path listed, when a later edit would be overwritten.',
      inputSchema: z.object({
        id: z
          .number()
          .int()
          .positive()
          .optional()
          .describe('The action id; omit for the last action.'),
      }),
      annotations: mutating,
    },
    handle(async ({ id }: { id?: number }, current) => {
      const result = await current.undo(id ?? 'last');
      if (result.status === 'refused') {
        return {
          isError: true,
          content: [
            {
              type: 'text',
              text: `Refused to undo #${result.undoes}: later edits would be overwritten:\n${result.conflicts
                .map(
                  (conflict) =>
                    `${conflict.path}: expected ${conflict.expected}, found ${conflict.found}`,
                )
                .join(
                  '\n',
                )}\nNothing changed. Revert those edits first, or roll back to a checkpoint.`,
            },
          ],
        };
      }
      return text(
        `undid #${result.undoes}; journaled as action #${result.id} (reversible: rewind undo ${result.id} redoes it)`,
      );
    }),
  );
  server.registerTool(
    'commit',
    {
      title: 'Commit an isolated session to the workspace',
      description:
        "Apply the isolated session's changes to the real workspace; refused, listing conflicts, when the workspace changed the same files.",
      inputSchema: z.object({ dryRun: z.boolean().optional() }),
      annotations: mutating,
    },
    handle(async ({ dryRun }: { dryRun?: boolean }, current) => {
      const result = await current.commit({ dryRun: dryRun === true });
      const body = JSON.stringify(result, null, 2);
      return result.status === 'refused'
        ? { isError: true, content: [{ type: 'text', text: body }] }
        : text(body);
    }),
  );
  // Closing the server closes the session it opened (its ledger file handle).
  const close = server.close.bind(server);
  server.close = async () => {
    await close();
    if (opened) await (await opened.catch(() => undefined))?.close();
  };
  return server;
}
