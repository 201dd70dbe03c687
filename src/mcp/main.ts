import { once } from 'node:events';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { generateToken, init } from '../index.js';
import { serveHttp } from './http.js';
import { createMcpServer, type McpServerOptions, whenIdle } from './server.js';
import { AnsweringStdioTransport, messageLines } from './stdio.js';

/** The shortest token accepted: a guessable one would protect nothing. */
const MIN_TOKEN_LENGTH = 16;

const USAGE = `Usage: rewind mcp [--root DIR] [--http PORT [--host HOST] [--token TOKEN]] [--isolated]
                  [--hash-chain] [--tool-prefix PREFIX] [--sandbox bwrap|none|auto] [--network]
                  [--redact] [--redact-pattern RE]... [--block-private]
                  [--exec-timeout S] [--http-timeout S] [--no-watch]

Serves Rewind's tools over MCP: stdio by default, streamable HTTP with --http (127.0.0.1 unless
--host says otherwise). Every file operation is journaled and undoable.

--isolated works in an isolated session (a private view; the workspace changes only on commit),
and resumes the one it worked in before, whose work is never stranded by a restart.
--hash-chain makes a store the server creates (and an isolated session it starts) hash-chained,
and refuses to work in a session that is not. --tool-prefix puts PREFIX before every tool name
(rewind_ gives rewind_write), for clients that mix servers. The server watches the workspace
(inotifywait, where inotify-tools is installed) so checkpoints look only at what changed;
--no-watch leaves that to a walk of the workspace at each checkpoint. On SIGTERM or SIGINT, the
calls in flight finish and are answered first; a second signal stops the server at once.

Over HTTP, every request must carry a token: a random one per launch, printed on stderr in the
URL to give the client (http://127.0.0.1:PORT/mcp?token=...), or the one set by --token or the
REWIND_MCP_TOKEN variable (at least ${MIN_TOKEN_LENGTH} characters; the variable, unlike
--token, stays out of the process list other users can read).
Clients pass it in the URL or as "Authorization: Bearer TOKEN". Requests addressed to another
Host or sent from a web page (an Origin other than the server's) are refused.
`;

/** The options of `rewind mcp`, as the MCP server takes them. Throws with the usage on a mistake. */
export function mcpOptions(
  argv: readonly string[],
  cwd: string,
  env: Readonly<Record<string, string | undefined>> = {},
): McpServerOptions & { http?: { port: number; host: string; token?: string } } {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      root: { type: 'string' },
      http: { type: 'string' },
      host: { type: 'string' },
      token: { type: 'string' },
      isolated: { type: 'boolean' },
      'hash-chain': { type: 'boolean' },
      'tool-prefix': { type: 'string' },
      sandbox: { type: 'string' },
      network: { type: 'boolean' },
      redact: { type: 'boolean' },
      'redact-pattern': { type: 'string', multiple: true },
      'block-private': { type: 'boolean' },
      'exec-timeout': { type: 'string' },
      'http-timeout': { type: 'string' },
      'no-watch': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) throw new HelpRequest(USAGE);
  const seconds = (value: string | undefined, flag: string): number | undefined => {
    if (value === undefined) return undefined;
    const number = Number(value);
    if (!Number.isFinite(number) || number <= 0)
      throw new UsageMessage(`${flag} must be a positive number of seconds.\n${USAGE}`);
    return Math.round(number * 1000);
  };
  const sandbox = values.sandbox;
  if (sandbox !== undefined && sandbox !== 'bwrap' && sandbox !== 'none' && sandbox !== 'auto') {
    throw new UsageMessage(`--sandbox must be bwrap, none or auto.\n${USAGE}`);
  }
  const patterns = values['redact-pattern'] ?? [];
  const toolPrefix = values['tool-prefix'];
  if (toolPrefix !== undefined && !/^[A-Za-z0-9_.-]{1,32}$/.test(toolPrefix)) {
    throw new UsageMessage(
      `--tool-prefix must be 1 to 32 letters, digits, "_", "-" or ".".\n${USAGE}`,
    );
  }
  const execTimeoutMs = seconds(values['exec-timeout'], '--exec-timeout');
  const httpTimeoutMs = seconds(values['http-timeout'], '--http-timeout');
  let http: { port: number; host: string; token?: string } | undefined;
  if (values.http !== undefined) {
    const port = Number(values.http);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new UsageMessage(`--http takes a port number.\n${USAGE}`);
    const token = values.token ?? env.REWIND_MCP_TOKEN;
    if (token !== undefined) {
      checkToken(token, values.token !== undefined ? '--token' : 'REWIND_MCP_TOKEN');
    }
    http = { port, host: values.host ?? '127.0.0.1', ...(token !== undefined && { token }) };
  } else if (values.token !== undefined) {
    throw new UsageMessage(
      `--token goes with --http: over stdio, the client starts the server.\n${USAGE}`,
    );
  }
  return {
    root: resolve(cwd, values.root ?? '.'),
    session: {
      // A server keeps its session for its whole life: what changed is learned from inotify.
      watch: values['no-watch'] !== true,
      ...(values.isolated && { isolation: 'isolated' as const }),
      ...(sandbox && { sandbox }),
      ...(values.network && { network: true }),
      ...((values.redact || patterns.length > 0) && {
        redact: { headers: values.redact === true, patterns },
      }),
      ...(values['block-private'] && { blockPrivate: true }),
    },
    ...(execTimeoutMs && { execTimeoutMs }),
    ...(httpTimeoutMs && { httpTimeoutMs }),
    ...(values['hash-chain'] && { hashChain: true }),
    ...(toolPrefix !== undefined && { toolPrefix }),
    ...(http && { http }),
  };
}

/** Throws a usage message for a token too short to protect anything, or one with spaces. */
function checkToken(token: string, source: string): void {
  if (token.length < MIN_TOKEN_LENGTH || /\s/.test(token)) {
    throw new UsageMessage(
      `${source} must be at least ${MIN_TOKEN_LENGTH} characters, without spaces (leave it out for a random one).\n${USAGE}`,
    );
  }
}

/**
 * SIGINT and SIGTERM: the first (`signalled`) stops the server once the calls in flight finish;
 * one that comes while it stops (after the first, or once `stopping` says the server is stopping
 * anyway) ends it at once, as the signal would (exit 130 or 143), saying so on stderr.
 */
function stopSignals(): { signalled: Promise<void>; stopping: () => void } {
  let isStopping = false;
  let stop: () => void = () => {};
  const signalled = new Promise<void>((done) => {
    stop = done;
  });
  const onSignal = (signal: NodeJS.Signals) => {
    if (isStopping) {
      process.stderr.write(
        `rewind mcp: ${signal} while stopping: stopping now, without waiting for the calls in flight (the next command in the session finishes or closes them).\n`,
      );
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    isStopping = true;
    stop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signalled,
    stopping: () => {
      isStopping = true;
    },
  };
}

/** A mistake in how `rewind mcp` was called: printed as it is on stderr, exit 2. */
export class UsageMessage extends Error {}

/** `rewind mcp --help`: the usage, asked for, printed on stdout, exit 0. */
export class HelpRequest extends Error {}

/**
 * `rewind mcp`: serves over stdio until the client goes, or over HTTP until interrupted. Nothing
 * but the protocol is written to stdout.
 */
export async function runMcp(argv: readonly string[], cwd: string): Promise<number> {
  let options: ReturnType<typeof mcpOptions>;
  try {
    options = mcpOptions(argv, cwd, process.env);
  } catch (error) {
    if (error instanceof HelpRequest) {
      process.stdout.write(error.message);
      return 0;
    }
    // parseArgs words its own mistakes (an unknown option) without the usage: point to it.
    const hint = error instanceof UsageMessage ? '' : '(run `rewind mcp --help` for usage)\n';
    process.stderr.write(
      `rewind mcp: ${error instanceof Error ? error.message : String(error)}\n${hint}`,
    );
    return 2;
  }
  // Said on stderr (stdout carries the protocol): checkpoints that walk again have a reason.
  // A watcher that retries says so, and says when it watches again: only a stop is for good.
  options.session = {
    ...options.session,
    onWatchStopped: (why, isRetrying) =>
      process.stderr.write(
        isRetrying
          ? `rewind mcp: cannot watch ${options.root} yet (${why}): it keeps trying, less and less often (at most once a minute); meanwhile its checkpoints look at every entry.\n`
          : `rewind mcp: not watching ${options.root} (${why}): its checkpoints look at every entry.\n`,
      ),
    onWatchResumed: () =>
      process.stderr.write(
        `rewind mcp: watching ${options.root} again: its checkpoints look only at what changed.\n`,
      ),
  };
  if (!options.http) {
    const server = createMcpServer(options);
    // A line that is not a message is answered (and said on stderr), not silently dropped.
    const lines = process.stdin.pipe(
      messageLines((rejected) => {
        process.stdout.write(rejected.answer);
        process.stderr.write(`rewind mcp: ${rejected.reason} Answered with a JSON-RPC error.\n`);
      }),
    );
    // A stdin that fails ends what is read from it: the requests read so far are still answered.
    process.stdin.once('error', () => lines.end());
    const transport = new AnsweringStdioTransport(lines, process.stdout);
    await server.connect(transport);
    // The client went away (once every request it sent is answered) or asked us to stop: finish
    // the calls in flight, then stop.
    const signals = stopSignals();
    await Promise.race([transport.closed, signals.signalled]);
    signals.stopping();
    await whenIdle(server);
    // A call that just ended is answered on the next turns of the loop: let its answer out.
    await new Promise((done) => setImmediate(done));
    if (process.stdout.writableLength > 0) await once(process.stdout, 'drain');
    await server.close();
    // Stopped by a signal, stdin may still be open: reading it would keep the process alive.
    process.stdin.destroy();
    return 0;
  }
  const { port, host } = options.http;
  const token = options.http.token ?? generateToken();
  let served: Awaited<ReturnType<typeof serveHttp>>;
  try {
    // The store is made once, before any request (requests racing to make it would collide),
    // and only once the port is ours: a busy port leaves nothing behind.
    served = await serveHttp(options, { port, host, token }, () =>
      init({ workspace: options.root, ...(options.hashChain && { hashChain: true }) }),
    );
  } catch (error) {
    // Only listening's own failures (a busy port, an address not ours, a name not found).
    const { code, syscall } = error as NodeJS.ErrnoException;
    if (syscall !== 'listen' && syscall !== 'getaddrinfo') throw error;
    const why =
      code === 'EADDRINUSE'
        ? 'the port is in use'
        : code === 'EADDRNOTAVAIL'
          ? "the address is not one of this machine's"
          : (error as Error).message;
    process.stderr.write(`rewind mcp: cannot listen on ${host} port ${port}: ${why} (${code}).\n`);
    return 1;
  }
  const { endpoint, stop } = served;
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${endpoint.port}/mcp`;
  process.stderr.write(
    `rewind mcp: serving on ${base}?token=${encodeURIComponent(token)}\n` +
      'rewind mcp: give the client that URL, or the URL without ?token= and the header "Authorization: Bearer TOKEN"; requests without the token, for another Host or from a web page are refused.\n',
  );
  await stopSignals().signalled;
  // The calls in flight finish, are journaled and answered; then the server stops.
  await stop();
  return 0;
}
