import type { IncomingHttpHeaders } from 'node:http';
import { RewindError } from '../errors.js';
import { nodeNet, timerDelayOf } from '../lib/index.js';

/** An HTTP request as an action describes it. */
export interface HttpRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
}

/** The bytes of a response body kept unless told otherwise. */
export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

/** Options of {@link performRequest}. */
export interface HttpOptions {
  /** The whole exchange must end within this. Default 30 000 ms. */
  timeoutMs?: number;
  /** Also refuse loopback and private addresses (127/8, 10/8, 172.16/12, 192.168/16, ::1, fc00::/7...). */
  blockPrivate?: boolean;
  /** Bytes of the response body kept; the rest is dropped. Default 10 MiB. */
  maxBodyBytes?: number;
}

/** The response, as evidence. */
export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  bodyTruncated: boolean;
  durationMs: number;
  /** The address the request went to, after the checks. */
  address: string;
}

/** Address ranges with no legitimate use as a request target, in IPv4 and IPv6. */
const NEVER: [string, number, 'ipv4' | 'ipv6', string][] = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified ("this network")'],
  ['169.254.0.0', 16, 'ipv4', 'link-local (cloud metadata services live here)'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved (and broadcast)'],
  ['192.0.0.0', 24, 'ipv4', 'reserved for protocol assignments'],
  ['192.0.2.0', 24, 'ipv4', 'reserved for documentation'],
  ['198.51.100.0', 24, 'ipv4', 'reserved for documentation'],
  ['203.0.113.0', 24, 'ipv4', 'reserved for documentation'],
  ['198.18.0.0', 15, 'ipv4', 'reserved for benchmarking'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local (deprecated)'],
  ['ff00::', 8, 'ipv6', 'multicast'],
  ['100::', 64, 'ipv6', 'reserved for discard'],
  ['2001:db8::', 32, 'ipv6', 'reserved for documentation'],
];

/** Ranges refused only with `blockPrivate`: this machine and private networks. */
const PRIVATE: [string, number, 'ipv4' | 'ipv6', string][] = [
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared (carrier-grade NAT)'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['fc00::', 7, 'ipv6', 'private (unique local)'],
];

function firstMatch(
  ranges: readonly [string, number, 'ipv4' | 'ipv6', string][],
  address: string,
  family: 'ipv4' | 'ipv6',
): string | undefined {
  for (const [network, prefix, type, why] of ranges) {
    if (type !== family) continue;
    const list = new (nodeNet().BlockList)();
    list.addSubnet(network, prefix, type);
    if (list.check(address, family)) return why;
  }
  return undefined;
}

/** The eight 16-bit groups of an IPv6 address (its zone dropped), or undefined for anything else. */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.toLowerCase().replace(/%.*$/, '');
  if (nodeNet().isIP(text) !== 6) return undefined;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (part: string | undefined): number[] =>
    part ? part.split(':').map((group) => Number.parseInt(group, 16)) : [];
  const [head, tail] = text.split('::');
  if (tail === undefined) return parse(head);
  const before = parse(head);
  const after = parse(tail);
  return [...before, ...new Array<number>(8 - before.length - after.length).fill(0), ...after];
}

const ipv4Of = (high: number, low: number): string =>
  [high >> 8, high & 255, low >> 8, low & 255].join('.');

/**
 * The IPv4 addresses an IPv6 address carries, each with the mechanism that carries it: traffic
 * to such an address reaches (or is translated to) that IPv4 host, so it is checked as one.
 */
function embeddedIpv4(groups: readonly number[]): { address: string; how: string }[] {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const zeros = (...values: number[]) => values.every((value) => value === 0);
  const found: { address: string; how: string }[] = [];
  const low = ipv4Of(g6, g7);
  if (zeros(g0, g1, g2, g3, g4) && g5 === 0xffff) found.push({ address: low, how: 'IPv4-mapped' });
  if (zeros(g0, g1, g2, g3, g5) && g4 === 0xffff)
    found.push({ address: low, how: 'IPv4-translated' });
  // ::/96 is IPv4-compatible, but for :: (unspecified) and ::1 (loopback), checked as IPv6.
  if (zeros(g0, g1, g2, g3, g4, g5) && (g6 !== 0 || g7 > 1))
    found.push({ address: low, how: 'IPv4-compatible' });
  if (g0 === 0x64 && g1 === 0xff9b && zeros(g2, g3, g4, g5))
    found.push({ address: low, how: 'NAT64' });
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1 && zeros(g3, g4, g5))
    found.push({ address: low, how: 'local-use NAT64' });
  if (g0 === 0x2002) found.push({ address: ipv4Of(g1, g2), how: '6to4' });
  if (g0 === 0x2001 && g1 === 0) {
    found.push({ address: ipv4Of(g2, g3), how: 'Teredo server' });
    found.push({ address: ipv4Of(g6 ^ 0xffff, g7 ^ 0xffff), how: 'Teredo client' });
  }
  if ((g4 & 0xfdff) === 0 && g5 === 0x5efe) found.push({ address: low, how: 'ISATAP' });
  return found;
}

/**
 * Why a request to `address` is refused, or undefined when it may go. Checks the ranges that no
 * request has a use for, and with `blockPrivate` loopback and private ones. An IPv4 address an
 * IPv6 one carries (IPv4-mapped, -translated or -compatible, NAT64, 6to4, Teredo, ISATAP) is
 * checked as that IPv4 address too.
 */
export function refusalOf(address: string, blockPrivate: boolean): string | undefined {
  const version = nodeNet().isIP(address.replace(/%.*$/, ''));
  if (version === 0) return 'not an IP address';
  if (version === 4) {
    return (
      firstMatch(NEVER, address, 'ipv4') ??
      (blockPrivate ? firstMatch(PRIVATE, address, 'ipv4') : undefined)
    );
  }
  const groups = ipv6Groups(address) as number[];
  for (const inner of embeddedIpv4(groups)) {
    const why = refusalOf(inner.address, blockPrivate);
    if (why !== undefined) return `${why}, as ${inner.address} (${inner.how})`;
  }
  const bare = address.replace(/%.*$/, '');
  return (
    firstMatch(NEVER, bare, 'ipv6') ??
    (blockPrivate ? firstMatch(PRIVATE, bare, 'ipv6') : undefined)
  );
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Checks a request before anything is sent: an http(s) URL, a method and header names that are
 * tokens, header values without line breaks. Throws `INVALID_ARGUMENT` saying which.
 */
export function checkRequest(request: HttpRequest): URL {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${JSON.stringify(request.url)} is not a URL. Give an absolute http:// or https:// URL.`,
      { data: { url: request.url } },
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `Only http:// and https:// URLs can be requested, not ${url.protocol}//.`,
      { data: { url: request.url } },
    );
  }
  if (!TOKEN.test(request.method)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${JSON.stringify(request.method)} is not an HTTP method.`,
      {
        data: { method: request.method },
      },
    );
  }
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    if (!TOKEN.test(name) || /[\r\n\0]/.test(value)) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `The header ${JSON.stringify(`${name}: ${value}`)} is malformed: a name is letters, digits and -, a value has no line break.`,
        { data: { header: name } },
      );
    }
  }
  return url;
}

/**
 * Resolves the host of `url` and checks every address it has (a name with one bad address is
 * refused whole). Returns the address to connect to. Throws `ADDRESS_REFUSED`, and `HTTP_FAILED`
 * when the name does not resolve.
 */
export async function checkTarget(
  url: URL,
  blockPrivate: boolean,
): Promise<{ address: string; family: 4 | 6 }> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  if (nodeNet().isIP(host) !== 0) {
    addresses = [{ address: host, family: nodeNet().isIP(host) }];
  } else {
    try {
      // Loaded when a request is made: the `rewind` command starts faster without it.
      const { lookup } = await import('node:dns/promises');
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch (error) {
      throw new RewindError(
        'HTTP_FAILED',
        `The host ${host} does not resolve (${(error as NodeJS.ErrnoException).code ?? String(error)}). Check the URL.`,
        { data: { host }, cause: error },
      );
    }
  }
  for (const { address } of addresses) {
    const why = refusalOf(address, blockPrivate);
    if (why !== undefined) {
      throw new RewindError(
        'ADDRESS_REFUSED',
        `Refusing to send a request to ${host}${host === address ? '' : ` (${address})`}: the address is ${why}. ` +
          (blockPrivate && PRIVATE.some(([, , , reason]) => why.startsWith(reason))
            ? 'Private and loopback targets are blocked in this session.'
            : 'No request has a legitimate use for it.'),
        { data: { host, address, reason: why } },
      );
    }
  }
  const first = addresses[0] as { address: string; family: number };
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}

function flatHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

/**
 * Sends one HTTP request after {@link checkRequest} and {@link checkTarget}, connecting to the
 * checked address itself (a second resolution cannot swap in another), with a timeout on the
 * whole exchange and a cap on the body kept. Redirects are not followed. Throws
 * `INVALID_ARGUMENT`, `ADDRESS_REFUSED`, and `HTTP_FAILED` when the name does not resolve or the
 * exchange fails or times out.
 */
export async function performRequest(
  request: HttpRequest,
  options: HttpOptions = {},
): Promise<HttpResponse> {
  const url = checkRequest(request);
  const target = await checkTarget(url, options.blockPrivate === true);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const started = process.hrtime.bigint();
  const { request: send } = await (url.protocol === 'https:'
    ? import('node:https')
    : import('node:http'));
  return new Promise((resolve, reject) => {
    const fail = (error: Error, code = 'HTTP_FAILED') =>
      reject(
        new RewindError(
          code as 'HTTP_FAILED',
          `The request ${request.method} ${url.href} failed: ${error.message}.`,
          { data: { url: url.href }, cause: error },
        ),
      );
    const outgoing = send(
      url,
      {
        method: request.method,
        headers: request.headers ?? {},
        // Connects to the address that was checked, never to a fresh resolution of the name.
        lookup: ((
          _host: string,
          lookupOptions: { all?: boolean },
          callback: (...args: unknown[]) => void,
        ) => {
          if (lookupOptions.all)
            callback(null, [{ address: target.address, family: target.family }]);
          else callback(null, target.address, target.family);
        }) as never,
        signal: AbortSignal.timeout(timerDelayOf(timeoutMs)),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        let truncated = false;
        response.on('data', (chunk: Buffer) => {
          if (kept >= limit) {
            truncated = true;
            return;
          }
          const part = chunk.subarray(0, limit - kept);
          if (part.length < chunk.length) truncated = true;
          chunks.push(part);
          kept += part.length;
        });
        response.on('error', fail);
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: flatHeaders(response.headers),
            body: Buffer.concat(chunks),
            bodyTruncated: truncated,
            durationMs: Number(process.hrtime.bigint() - started) / 1e6,
            address: target.address,
          }),
        );
      },
    );
    outgoing.on('error', (error) =>
      fail(
        error.name === 'AbortError' || error.name === 'TimeoutError'
          ? new Error(`no answer within ${timeoutMs} ms`)
          : error,
      ),
    );
    outgoing.end(request.body ?? undefined);
  });
}
