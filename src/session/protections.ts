/**
 * What protects a session's records and requests: redaction and the refusal of private
 * addresses. They belong to the session, not to a process: recorded in its `session-started`
 * entry, added to by `settings-tightened` entries, and applied by every process that opens it,
 * whatever that process was given. A process can add to them, never take from them: a session
 * that redacts keeps redacting (start a new session to work without).
 */
import type { LedgerEntry } from '../ledger/index.js';
import type { RedactionOptions } from '../lib/index.js';

/** A session's protections. */
export interface Protections {
  /** Redaction: credentials (`headers`: credential headers and URL passwords) and `patterns`. */
  readonly redact: { readonly headers: boolean; readonly patterns: readonly string[] };
  /** Refuse HTTP requests to loopback and private addresses too. */
  readonly blockPrivate: boolean;
}

/** What a process asks for: the options of `openSession` and of the calls that start a session. */
export interface ProtectionOptions {
  /** Redaction: recorded in a session being started, added to one being opened. */
  redact?: RedactionOptions;
  /** Refuse private addresses: recorded in a session being started, added to one being opened. */
  blockPrivate?: boolean;
}

/** No protection: what a session started without any has. */
export const UNPROTECTED: Protections = {
  redact: { headers: false, patterns: [] },
  blockPrivate: false,
};

function redactOf(value: unknown): { headers: boolean; patterns: string[] } {
  const redact = (value ?? {}) as { headers?: unknown; patterns?: unknown };
  return {
    headers: redact.headers === true,
    patterns: Array.isArray(redact.patterns)
      ? redact.patterns.filter((pattern): pattern is string => typeof pattern === 'string')
      : [],
  };
}

/** `base` with `more` added: every credential rule, pattern and refusal either has. */
function union(base: Protections, more: ProtectionOptions): Protections {
  const patterns = [...base.redact.patterns];
  for (const pattern of more.redact?.patterns ?? []) {
    if (!patterns.includes(pattern)) patterns.push(pattern);
  }
  return {
    redact: { headers: base.redact.headers || more.redact?.headers === true, patterns },
    blockPrivate: base.blockPrivate || more.blockPrivate === true,
  };
}

/** The protections a session's entries record: its `session-started`, then each tightening. */
export function protectionsOf(entries: readonly LedgerEntry[]): Protections {
  let protections = UNPROTECTED;
  for (const entry of entries) {
    if (entry.kind !== 'session-started' && entry.kind !== 'settings-tightened') continue;
    protections = union(protections, {
      redact: redactOf(entry.body.redact),
      blockPrivate: entry.body.blockPrivate === true,
    });
  }
  return protections;
}

/**
 * What `given` adds to `recorded` (the body of a `settings-tightened` entry), or undefined when
 * it adds nothing.
 */
export function tighteningOf(
  recorded: Protections,
  given: ProtectionOptions,
): Record<string, unknown> | undefined {
  const isHeaders = given.redact?.headers === true && !recorded.redact.headers;
  const patterns = [...new Set(given.redact?.patterns ?? [])].filter(
    (pattern) => !recorded.redact.patterns.includes(pattern),
  );
  const isBlockPrivate = given.blockPrivate === true && !recorded.blockPrivate;
  if (!isHeaders && patterns.length === 0 && !isBlockPrivate) return undefined;
  return {
    ...((isHeaders || patterns.length > 0) && {
      redact: { ...(isHeaders && { headers: true }), ...(patterns.length > 0 && { patterns }) },
    }),
    ...(isBlockPrivate && { blockPrivate: true }),
  };
}

/** The protections to record in the `session-started` entry of a session started with `given`. */
export function startedFieldsOf(given: ProtectionOptions): Record<string, unknown> {
  return tighteningOf(UNPROTECTED, given) ?? {};
}

/** The protections in force in a session that records `recorded` and is opened with `given`. */
export function protectionsIn(recorded: Protections, given: ProtectionOptions): Protections {
  return union(recorded, given);
}

/** True when `looser` lacks something `stricter` has. */
export function isLooser(looser: Protections, stricter: Protections): boolean {
  return tighteningOf(looser, stricter) !== undefined;
}
