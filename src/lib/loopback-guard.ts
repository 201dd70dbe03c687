/**
 * The guard of Rewind's local servers (`rewind mcp --http`, `rewind ui`): a web page the person
 * happens to visit can reach a loopback port too (directly, or through DNS rebinding), so every
 * request must name the server's own address in `Host`, carry no foreign `Origin`, and present
 * the launch's token, before anything else is read.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { nodeCrypto, nodeNet } from './builtins.js';

/** A fresh token for one launch: 256 random bits, URL-safe. */
export function generateToken(): string {
  return nodeCrypto().randomBytes(32).toString('base64url');
}

/** Where the server listens and the token its clients must present. */
export interface HttpEndpoint {
  /** The host given to listen on (`127.0.0.1` by default). */
  host: string;
  /** The port it listens on (the real one, once bound). */
  port: number;
  /** The address it is bound to, when known (what `localhost` resolved to). */
  address?: string;
  token: string;
}

/** Which server guards itself: for its refusals' messages, and the cookie that carries its token. */
export interface GuardedServer {
  /** The command that printed the token (`rewind mcp`). */
  name: string;
  /** Whom it serves, for a refused web page (`MCP clients on this machine only`). */
  serves: string;
  /** The cookie that may carry the token, for a server that serves a page. */
  cookie?: string;
}

/** A refused request: the HTTP status and what the client is told. */
export interface HttpRefusal {
  status: 401 | 403 | 421;
  message: string;
}

const LOOPBACK = /^(?:127\.\d+\.\d+\.\d+|::1|localhost)$/i;

/** True for a host name or address that only this machine reaches (127.x, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.test(host);
}
const WILDCARD = new Set(['0.0.0.0', '::', '']);

/** `host:port` as a Host header names it (an IPv6 address in brackets). */
function authorityOf(host: string, port: number): string {
  return `${nodeNet().isIP(host) === 6 ? `[${host}]` : host}:${port}`.toLowerCase();
}

/** The host and port a Host header (or an origin's authority) names. */
function splitAuthority(authority: string): { hostname: string; port: string } {
  const bracketed = /^\[([^\]]*)\](?::(\d*))?$/.exec(authority);
  if (bracketed) return { hostname: bracketed[1] ?? '', port: bracketed[2] ?? '' };
  const colon = authority.lastIndexOf(':');
  return colon === -1
    ? { hostname: authority, port: '' }
    : { hostname: authority.slice(0, colon), port: authority.slice(colon + 1) };
}

/**
 * Whether `authority` (a Host header, or an origin's host and port) names this server: the host
 * it listens on, with its port, or `localhost` when that is a loopback address. A server
 * listening on every address accepts any IP address or `localhost`, never a name, which is what
 * DNS rebinding needs.
 */
function isOwnAuthority(authority: string, endpoint: HttpEndpoint): boolean {
  const lower = authority.toLowerCase();
  const { hostname, port } = splitAuthority(lower);
  const isRightPort = port === String(endpoint.port) || (port === '' && endpoint.port === 80);
  if (!isRightPort) return false;
  const host = endpoint.host.toLowerCase();
  if (WILDCARD.has(host)) return nodeNet().isIP(hostname) !== 0 || hostname === 'localhost';
  const own = [host, endpoint.address ?? host].map(
    (name) => splitAuthority(authorityOf(name, endpoint.port)).hostname,
  );
  return own.includes(hostname) || (isLoopbackHost(host) && hostname === 'localhost');
}

/**
 * The token a request presents: `Authorization: Bearer TOKEN`, else `?token=TOKEN`, else the
 * cookie named `cookie` (a page's own requests: its scripts, its fetches, its event stream).
 */
function presentedToken(
  headers: IncomingHttpHeaders,
  url: string | undefined,
  cookie: string | undefined,
): string | undefined {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '');
  if (bearer) return bearer[1];
  const query = new URL(url ?? '/', 'http://server').searchParams.get('token');
  if (query !== null) return query;
  if (cookie === undefined) return undefined;
  for (const pair of (headers.cookie ?? '').split(';')) {
    const [name, ...value] = pair.trim().split('=');
    if (name === cookie) return value.join('=');
  }
  return undefined;
}

/** Compares two tokens in time that does not depend on where they differ. */
function isSameToken(presented: string, expected: string): boolean {
  const digest = (text: string) => nodeCrypto().createHash('sha256').update(text).digest();
  return nodeCrypto().timingSafeEqual(digest(presented), digest(expected));
}

/**
 * Why a request must be refused, or undefined when it may reach the MCP server: a `Host` that is
 * not this server's (421: DNS rebinding, or a proxy sending it elsewhere), an `Origin` that is
 * not this server's own (403: a web page), no token or a wrong one (401).
 */
export function refusalOfRequest(
  request: { headers: IncomingHttpHeaders; url?: string | undefined },
  endpoint: HttpEndpoint,
  server: GuardedServer = { name: 'rewind mcp', serves: 'MCP clients on this machine only' },
): HttpRefusal | undefined {
  const host = request.headers.host;
  if (host === undefined || !isOwnAuthority(host, endpoint)) {
    return {
      status: 421,
      message: `This server answers only requests addressed to ${authorityOf(endpoint.host, endpoint.port)}, not ${JSON.stringify(host ?? '')}.`,
    };
  }
  const origin = request.headers.origin;
  if (origin !== undefined) {
    let isOwn = false;
    try {
      const url = new URL(origin);
      isOwn = url.protocol === 'http:' && isOwnAuthority(url.host, endpoint);
    } catch {}
    if (!isOwn) {
      return {
        status: 403,
        message: `Requests from the web page ${JSON.stringify(origin)} are refused: this server serves ${server.serves}.`,
      };
    }
  }
  const token = presentedToken(request.headers, request.url, server.cookie);
  if (token === undefined || !isSameToken(token, endpoint.token)) {
    return {
      status: 401,
      message: `${token === undefined ? 'No token was presented' : 'The token is wrong'}: pass the token \`${server.name}\` printed at start, as "Authorization: Bearer TOKEN" or ?token=TOKEN in the URL.`,
    };
  }
  return undefined;
}
