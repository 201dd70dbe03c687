/**
 * `rewind mcp --http`: the MCP server over streamable HTTP, for the clients given its token only.
 * A web page the person happens to visit can reach a loopback port too (directly, or through DNS
 * rebinding), so every request must name this server's own address in `Host`, carry no foreign
 * `Origin`, and present the launch's token, before anything else is read.
 */
import { createServer, type Server } from 'node:http';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { type HttpEndpoint, refusalOfRequest } from '../index.js';
import { createMcpServer, type McpServerOptions, sharedSessionOf } from './server.js';

/** The JSON-RPC error body of a refusal (no request was read, so it answers none: id null). */
function refusalBody(message: string, code = -32000): string {
  return JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/**
 * Serves the MCP server over streamable HTTP on `host:port`, each request checked by
 * {@link refusalOfRequest} before its body is read. One server and transport per request, all
 * working in one session (see {@link sharedSessionOf}), which `stop` closes. Resolves with the
 * listening server, the port it got (for port 0) and how to stop it, letting the requests being
 * answered finish. `prepare` runs once the port is listened on, before any request is served.
 */
export async function serveHttp(
  options: McpServerOptions,
  listen: { host: string; port: number; token: string },
  prepare: () => Promise<unknown> = async () => {},
): Promise<{ server: Server; endpoint: HttpEndpoint; stop: () => Promise<void> }> {
  const endpoint: HttpEndpoint = { ...listen };
  // Every request's server works in one session, opened once and watching while the server runs.
  const opened = sharedSessionOf(options);
  const shared = { ...options, sharedSession: opened };
  // What must be done before a request is served, once the port is ours: a port that cannot be
  // listened on leaves nothing made.
  let isPrepared: () => void = () => {};
  const prepared = new Promise<void>((done) => {
    isPrepared = done;
  });
  // The requests being answered: a stop lets them finish (journaled and answered) first.
  let answering = 0;
  const answered: (() => void)[] = [];
  const http = createServer(async (request, response) => {
    const refusal = refusalOfRequest(request, endpoint);
    if (refusal) {
      response.writeHead(refusal.status, {
        'content-type': 'application/json',
        ...(refusal.status === 401 && { 'www-authenticate': 'Bearer realm="rewind"' }),
      });
      response.end(refusalBody(refusal.message));
      request.resume();
      return;
    }
    // A POST carries calls, answered in one JSON body; a GET is a stream that stays open.
    if (request.method === 'POST') {
      answering += 1;
      response.on('close', () => {
        answering -= 1;
        if (answering === 0) for (const done of answered.splice(0)) done();
      });
    }
    await prepared;
    const server = createMcpServer(shared);
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
      response.end(refusalBody(String(error), -32700));
    }
  });
  // A port in use or an address not ours fails here (EADDRINUSE, EADDRNOTAVAIL), not later.
  await new Promise<void>((done, fail) => {
    http.once('error', fail);
    http.listen(listen.port, listen.host, () => {
      http.off('error', fail);
      done();
    });
  });
  try {
    await prepare();
  } catch (error) {
    http.close();
    throw error;
  }
  isPrepared();
  const address = http.address();
  if (typeof address === 'object' && address) {
    endpoint.port = address.port;
    endpoint.address = address.address;
  }
  /** Stops listening, waits for the requests being answered, then closes every connection. */
  const stop = async (): Promise<void> => {
    http.close();
    http.closeIdleConnections();
    if (answering > 0) await new Promise<void>((done) => answered.push(done));
    // Clients may keep connections open: the server stops now, not when they let go.
    http.closeAllConnections();
    await opened.close();
  };
  return { server: http, endpoint, stop };
}
