/**
 * `rewind ui`: a local web timeline of a workspace's sessions, served on loopback to whoever has
 * the launch's token. Reads go through the operation table like every edge's; the actions a
 * person may take from the page (rollback, undo, approve, discard, compensate, commit) are the
 * same operations the CLI runs, each in its own short hold of the workspace lock.
 */
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { type Context, Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import {
  generateToken,
  type HttpEndpoint,
  isLoopbackHost,
  isRewindError,
  ledgerRevision,
  openSession,
  RewindError,
  refusalOfRequest,
  type Session,
  status,
} from '../index.js';
import {
  type AnyOperation,
  approveOperation,
  checkInput,
  checkpointsOperation,
  commitOperation,
  compensateOperation,
  conversationShowOperation,
  diffOperation,
  discardOperation,
  logOperation,
  type OperationTarget,
  rollbackOperation,
  sessionListOperation,
  showOperation,
  undoOperation,
} from '../operations/index.js';

/** What the page may read, by the name in `/api/read/NAME`. */
const READS: Readonly<Record<string, AnyOperation>> = {
  sessions: sessionListOperation,
  log: logOperation,
  checkpoints: checkpointsOperation,
  diff: diffOperation,
  show: showOperation,
  conversation: conversationShowOperation,
};

/** What the page's reads always ask for: its checkpoint list shows the lines each changed. */
const READ_INPUTS: Readonly<Record<string, Record<string, unknown>>> = {
  checkpoints: { lines: true },
};

/** What a person may do from the page, by operation name: each asks for confirmation first. */
const ACTIONS: Readonly<Record<string, AnyOperation>> = Object.fromEntries(
  [
    rollbackOperation,
    undoOperation,
    approveOperation,
    discardOperation,
    compensateOperation,
    commitOperation,
  ].map((operation) => [operation.name, operation]),
);

/** The page's files, built by scripts/bundle.mjs into dist/ui-assets/. */
const ASSETS: Readonly<Record<string, string>> = {
  '/': 'index.html',
  '/app.js': 'app.js',
  '/app.css': 'app.css',
};
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

/** Options of {@link startUi}. */
export interface UiOptions {
  /** The workspace whose store the page shows. */
  workspace: string;
  /** The directory of the page's built files (dist/ui-assets). */
  assets: string;
  /** Default 0: a free port. */
  port?: number;
  /** Default 127.0.0.1. Only loopback addresses are accepted. */
  host?: string;
  /** Default: a random one per launch. */
  token?: string;
  /** How often the event stream looks for new entries, ms. Default 250. */
  pollMs?: number;
}

/** A running UI server. */
export interface RunningUi {
  /** The page's address, with the token in it. */
  url: string;
  endpoint: HttpEndpoint;
  /** How many of the page's requests are being run now (an action, a read). */
  readonly running: number;
  /**
   * Stops taking requests, waits for those being run (a rollback started from the page finishes,
   * and its answer is sent), then closes every connection.
   */
  close(): Promise<void>;
}

/** The operation target for one request: the session the page names, opened at most once. */
function targetFor(workspace: string, session: string | undefined) {
  let opened: Promise<Session> | undefined;
  const target: OperationTarget = {
    workspace,
    session: () => {
      // Without the lock: the page must not wait for an agent's running command to read.
      opened ??= openSession({
        workspace,
        lockOnOpen: false,
        ...(session !== undefined && { session }),
      });
      return opened;
    },
    sessionId: async () => session,
    resolveFile: async () => {
      throw new RewindError('INVALID_ARGUMENT', 'The web page names no files outside the store.');
    },
    defaults: {},
  };
  const close = async () => {
    if (opened) await (await opened.catch(() => undefined))?.close();
  };
  return { target, close };
}

/** An error as the page shows it: its code, message and data (a refusal's paths among them). */
function errorBody(error: unknown): { code: string; message: string; data: unknown } {
  if (isRewindError(error)) return { code: error.code, message: error.message, data: error.data };
  return {
    code: 'UNEXPECTED',
    message: error instanceof Error ? error.message : String(error),
    data: {},
  };
}

/** Runs one operation of the table for the page, answering its output or its error as JSON. */
async function runFor(
  context: Context,
  workspace: string,
  operation: AnyOperation,
  session: string | undefined,
  given: unknown,
): Promise<Response> {
  const checked = checkInput(operation, given ?? {});
  if (checked.problem) {
    const { key, message } = checked.problem;
    return context.json(
      { error: { code: 'INVALID_ARGUMENT', message: `${key ?? 'input'} ${message}`, data: {} } },
      400,
    );
  }
  const { target, close } = targetFor(workspace, session);
  try {
    return context.json({ output: await operation.run(target, checked.input) });
  } catch (error) {
    const body = errorBody(error);
    return context.json({ error: body }, body.code === 'UNEXPECTED' ? 500 : 409);
  } finally {
    await close();
  }
}

/** The query of a read as its operation input: `id` and `last` are numbers, the rest text. */
function inputOf(query: Record<string, string>): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(query)) {
    if (key === 'session' || key === 'token') continue;
    input[key] = key === 'id' || key === 'last' ? Number(value) : value;
  }
  return input;
}

/**
 * Starts the UI server for `workspace` on a loopback address. Resolves once it listens, with the
 * page's URL (token included). Throws `INVALID_ARGUMENT` for a host that is not loopback.
 */
export async function startUi(options: UiOptions): Promise<RunningUi> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopbackHost(host)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `rewind ui listens on loopback only (127.0.0.1, ::1, localhost), not ${host}: the page can roll back and approve.`,
      { data: { host } },
    );
  }
  // A workspace without a store is refused here, saying how to make one (STORE_NOT_FOUND).
  const { workspace } = await status({ workspace: options.workspace });
  const endpoint: HttpEndpoint = {
    host,
    port: options.port ?? 0,
    token: options.token ?? generateToken(),
  };
  const cookie = () => `rewind-ui-${endpoint.port}`;
  const pollMs = options.pollMs ?? 250;
  const app = new Hono();

  app.use('*', async (context, next) => {
    const headers = Object.fromEntries(context.req.raw.headers);
    const refusal = refusalOfRequest({ headers, url: context.req.url }, endpoint, {
      name: 'rewind ui',
      serves: 'its own page only',
      cookie: cookie(),
    });
    if (refusal)
      return context.json({ error: { code: 'REFUSED', message: refusal.message } }, refusal.status);
    await next();
    context.header('x-content-type-options', 'nosniff');
    context.header('referrer-policy', 'no-referrer');
    context.header('cache-control', 'no-store');
    return undefined;
  });

  for (const [path, file] of Object.entries(ASSETS)) {
    app.get(path, async (context) => {
      // The token came in the address: keep it in a cookie of this port only, for the page's
      // own requests, and take it out of the address bar (and of the history).
      if (new URL(context.req.url).searchParams.has('token')) {
        context.header(
          'set-cookie',
          `${cookie()}=${endpoint.token}; Path=/; HttpOnly; SameSite=Strict`,
        );
        return context.redirect(path === '/' ? '/' : path, 303);
      }
      const body = await readFile(join(options.assets, file));
      context.header('content-type', CONTENT_TYPES[file.split('.').pop() ?? ''] ?? 'text/plain');
      context.header(
        'content-security-policy',
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
      );
      return context.body(body);
    });
  }

  app.get('/api/workspace', (context) => context.json({ output: { workspace } }));

  app.get('/api/read/:name', (context) => {
    const operation = READS[context.req.param('name')];
    if (!operation)
      return context.json({ error: { code: 'NOT_FOUND', message: 'No such read.' } }, 404);
    const query = context.req.query();
    const input = { ...inputOf(query), ...READ_INPUTS[operation.name] };
    return runFor(context, workspace, operation, query.session, input);
  });

  app.post('/api/action/:name', async (context) => {
    const operation = ACTIONS[context.req.param('name')];
    if (!operation) {
      return context.json(
        { error: { code: 'NOT_FOUND', message: 'The page offers no such action.' } },
        404,
      );
    }
    // Only JSON: a cross-site form cannot send it without a preflight the server never answers.
    if (!(context.req.header('content-type') ?? '').startsWith('application/json')) {
      return context.json(
        { error: { code: 'INVALID_ARGUMENT', message: 'Send the action as application/json.' } },
        415,
      );
    }
    let body: { session?: unknown; input?: unknown };
    try {
      body = await context.req.json();
    } catch {
      return context.json(
        { error: { code: 'INVALID_ARGUMENT', message: 'The body is not JSON.' } },
        400,
      );
    }
    const session = typeof body.session === 'string' ? body.session : undefined;
    return runFor(context, workspace, operation, session, body.input);
  });

  // New entries, live: an event whenever a session's ledger grows (or a session appears), its
  // ledgers files or rows in a database. A poll that fails (the store moved away, the database
  // restarting) is a `problem` event with the error, once until it says something else; it is
  // retried, and the first poll that reads again is a `ledger` event.
  app.get('/api/events', (context) =>
    streamSSE(context, async (stream) => {
      let last: string | undefined;
      let problem = '';
      let isOpen = true;
      stream.onAbort(() => {
        isOpen = false;
      });
      while (isOpen) {
        try {
          const now = await ledgerRevision({ workspace });
          if (now !== last) {
            await stream.writeSSE({ event: 'ledger', data: String(Date.now()) });
            last = now;
            problem = '';
          }
        } catch (error) {
          const body = JSON.stringify(errorBody(error));
          if (body !== problem) await stream.writeSSE({ event: 'problem', data: body });
          problem = body;
          last = undefined;
        }
        await stream.sleep(pollMs);
      }
    }),
  );

  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const started = serve({ fetch: app.fetch, port: endpoint.port, hostname: host }, () =>
      resolve(started),
    );
    started.once('error', reject);
  });
  // The answers not yet sent (but the event streams', which never end), which closing waits for:
  // an action cut off as the process exits would be left for recovery to finish or undo.
  const unanswered = new Set<ServerResponse>();
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    if (new URL(request.url ?? '/', 'http://ui').pathname === '/api/events') return;
    unanswered.add(response);
    response.once('close', () => unanswered.delete(response));
  });
  const address = server.address() as AddressInfo;
  endpoint.port = address.port;
  endpoint.address = address.address;
  const authority = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host === 'localhost' ? 'localhost' : authority}:${endpoint.port}/?token=${endpoint.token}`,
    endpoint,
    get running() {
      return unanswered.size;
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const connections = server as {
        closeIdleConnections?: () => void;
        closeAllConnections?: () => void;
      };
      connections.closeIdleConnections?.();
      await Promise.all(
        [...unanswered].map((response) => new Promise((sent) => response.once('close', sent))),
      );
      // The event streams never end on their own.
      connections.closeAllConnections?.();
      await closed;
    },
  };
}
