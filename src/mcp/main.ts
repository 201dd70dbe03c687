import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { init } from '../index.js';
import { createMcpServer, type McpServerOptions, whenIdle } from './server.js';

const USAGE = `Usage: rewind mcp [--root DIR] [--http PORT [--host HOST]] [--isolated] [--sandbox bwrap|none|auto]
                  [--network] [--redact] [--redact-pattern RE]... [--block-private]
                  [--exec-timeout S] [--http-timeout S]

Serves Rewind's tools over MCP: stdio by default, streamable HTTP with --http (127.0.0.1 unless
--host says otherwise). Every file operation is journaled and undoable.
`;

/** The options of `rewind mcp`, as the MCP server takes them. Throws with the usage on a mistake. */
export function mcpOptions(
  argv: readonly string[],
  cwd: string,
): McpServerOptions & { http?: { port: number; host: string } } {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      root: { type: 'string' },
      http: { type: 'string' },
      host: { type: 'string' },
      isolated: { type: 'boolean' },
      sandbox: { type: 'string' },
      network: { type: 'boolean' },
      redact: { type: 'boolean' },
      'redact-pattern': { type: 'string', multiple: true },
      'block-private': { type: 'boolean' },
      'exec-timeout': { type: 'string' },
      'http-timeout': { type: 'string' },
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
  const execTimeoutMs = seconds(values['exec-timeout'], '--exec-timeout');
  const httpTimeoutMs = seconds(values['http-timeout'], '--http-timeout');
  let http: { port: number; host: string } | undefined;
  if (values.http !== undefined) {
    const port = Number(values.http);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new UsageMessage(`--http takes a port number.\n${USAGE}`);
    http = { port, host: values.host ?? '127.0.0.1' };
  }
  return {
    root: resolve(cwd, values.root ?? '.'),
    session: {
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
    ...(http && { http }),
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
    options = mcpOptions(argv, cwd);
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
  if (!options.http) {
    const server = createMcpServer(options);
    await server.connect(new StdioServerTransport());
    // The client went away or asked us to stop: finish the calls in flight, then stop.
    await new Promise<void>((done) => {
      process.stdin.on('close', done);
      process.on('SIGTERM', done);
      process.on('SIGINT', done);
    });
    await whenIdle(server);
    await server.close();
    return 0;
  }
  // Stateless: one server and transport per request; the session's lock serializes clients.
  // The store is made once, before any request: requests racing to make it would collide.
  await init({ workspace: options.root });
  const { port, host } = options.http;
  const http = createServer(async (request, response) => {
    const server = createMcpServer(options);
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    response.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      let body = '';
      for await (const chunk of request) body += chunk;
      await transport.handleRequest(request, response, body ? JSON.parse(body) : undefined);
    } catch (error) {
      if (!response.headersSent) response.writeHead(400, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          jsonrpc: '2.0',
          error: { code: -32700, message: String(error) },
          id: null,
        }),
      );
    }
  });
  await new Promise<void>((done) => http.listen(port, host, done));
  const address = http.address();
  process.stderr.write(
    `rewind mcp: serving on http://${host}:${typeof address === 'object' && address ? address.port : port}/mcp\n`,
  );
  await new Promise<void>((done) => {
    process.on('SIGINT', done);
    process.on('SIGTERM', done);
  });
  http.close();
  // Clients may keep connections open: the server stops now, not when they let go.
  http.closeAllConnections();
  return 0;
}
