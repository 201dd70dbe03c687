import { RewindError } from '../errors.js';
import { jsonPreview } from './text.js';

/** Header names whose values are credentials: redacted whenever redaction is on. */
export const SENSITIVE_HEADERS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key',
  'x-auth-token',
  'x-access-token',
  'x-csrf-token',
  'x-xsrf-token',
  'x-amz-security-token',
  'x-goog-api-key',
  'private-token',
] as const;

/** What replaces a redacted value. */
export const REDACTED = '[redacted]';

/**
 * Bytes read past an output cap (a command's stdout and stderr, a response body) so that a secret
 * the cap falls inside is still seen whole, and redacted whole rather than stored in part.
 */
export const REDACTION_LOOKAHEAD_BYTES = 64 * 1024;

/**
 * The password of a URL that carries credentials, whatever its scheme (`https://user:PASSWORD@host`,
 * `postgres://user:PASSWORD@db/app`, `redis://:PASSWORD@cache`): group 1 is everything before the
 * password, group 2 the password, up to the last `@` of the authority (a password may hold an
 * unescaped `@`, never a space, a quote, `/`, `?` or `#`).
 */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s/?#@:"'<>`]*:)([^\s/?#"'<>`]+)@/gi;

/** `text` with the password of every URL in it redacted: for a URL shown in a message. */
export function withoutUrlPasswords(text: string): string {
  return text.replace(URL_PASSWORD, `$1${REDACTED}@`);
}

/** Options of {@link createRedactor}. */
export interface RedactionOptions {
  /**
   * Redact credentials: the values of {@link SENSITIVE_HEADERS}, and the password of every URL
   * (`scheme://user:PASSWORD@host`) in every text kept. What `--redact` turns on.
   */
  headers?: boolean;
  /** Regular expressions (source text) whose matches are redacted in every text kept. */
  patterns?: readonly string[];
}

/** What a redaction of a text did. */
export interface Redacted {
  text: string;
  /** How many secrets were replaced. */
  count: number;
}

/** Strips secrets from what is about to be hashed or stored. */
export interface Redactor {
  readonly isActive: boolean;
  /**
   * The text with every secret replaced: each pattern match, each URL password (with `headers`),
   * and every occurrence of `literals` (secret values already known, such as a redacted header's,
   * echoed back). Rules are matched on the text as given and what any of them covers is replaced
   * once, so a marker never splits a secret another rule would have caught.
   */
  text(text: string, literals?: readonly string[]): Redacted;
  /**
   * The first `cap` characters of the text, redacted: the text is read `cap` and beyond (up to
   * {@link REDACTION_LOOKAHEAD_BYTES} more), so a secret the cap falls inside is matched whole
   * and replaced whole (the marker may end a few characters past `cap`), never kept in part.
   * `truncated` says whether anything was left out.
   */
  capped(
    text: string,
    cap: number,
    literals?: readonly string[],
  ): Redacted & { truncated: boolean };
  /** The headers with sensitive values (and pattern matches in the others) replaced. */
  headers(
    headers: Readonly<Record<string, string>>,
    literals?: readonly string[],
  ): {
    headers: Record<string, string>;
    redacted: string[];
  };
  /** The values of `headers` that are redacted whole: secrets to scrub wherever they show up. */
  secretsOf(headers: Readonly<Record<string, string>>): string[];
  /**
   * The URL passwords in `text` (a command, a URL), as written, decoded, and in the Basic
   * credential an HTTP client makes of them: secrets to scrub wherever they show up (a command
   * that prints its connection string, a server that echoes the request). None without `headers`.
   */
  secretsIn(text: string): string[];
}

/** A stretch `[start, end)` of a text to replace. */
type Span = [number, number];

/** The spans sorted, with those that overlap or touch merged. */
function mergeSpans(spans: Span[]): Span[] {
  spans.sort((a, b) => a[0] - b[0]);
  const merged: Span[] = [];
  for (const span of spans) {
    const last = merged.at(-1);
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else merged.push([span[0], span[1]]);
  }
  return merged;
}

/** The text up to `end`, each span in it replaced by {@link REDACTED}. */
function replaceSpans(input: string, spans: readonly Span[], end: number): Redacted {
  let text = '';
  let at = 0;
  let count = 0;
  for (const [start, stop] of spans) {
    if (start >= end) break;
    text += input.slice(at, start) + REDACTED;
    at = stop;
    count += 1;
  }
  return { text: text + input.slice(at, Math.max(at, end)), count };
}

/** The URL passwords in a text, as written and decoded. */
function passwordsIn(input: string): string[] {
  const passwords: string[] = [];
  for (const match of input.matchAll(URL_PASSWORD)) {
    const password = match[2] ?? '';
    if (password !== REDACTED) passwords.push(...spellingsOf(password));
  }
  return passwords;
}

/** A password as written and, when it is percent-encoded, decoded. */
function spellingsOf(password: string): string[] {
  try {
    const decoded = decodeURIComponent(password);
    return decoded === password ? [password] : [password, decoded];
  } catch {
    return [password];
  }
}

/**
 * Builds a redactor. Throws `INVALID_ARGUMENT` naming a pattern that does not compile or that
 * matches the empty string (it would redact nothing useful and everything around it).
 */
export function createRedactor(options: RedactionOptions = {}): Redactor {
  const patterns = (options.patterns ?? []).map((source) => {
    let pattern: RegExp;
    let isEmptyMatched: boolean;
    try {
      pattern = new RegExp(source, 'g');
      // V8 compiles a pattern at its first use: one too large to compile fails here, not later.
      // The message says why without the source, which may be long: it is shown once, shortened.
      isEmptyMatched = pattern.test('');
    } catch (error) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `The redaction pattern ${jsonPreview(source, 200)} does not compile: ${(error as Error).message.split(': ').at(-1)}. Give a JavaScript regular expression.`,
        { data: { pattern: source } },
      );
    }
    if (isEmptyMatched) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `The redaction pattern ${jsonPreview(source, 200)} matches the empty string. Give one that matches only the secret.`,
        { data: { pattern: source } },
      );
    }
    return pattern;
  });
  const sensitive = new Set<string>(options.headers ? SENSITIVE_HEADERS : []);
  const isCredentials = options.headers === true;
  /** Every stretch of `input` a rule covers, merged. */
  const spansOf = (input: string, given: readonly string[]): Span[] => {
    const spans: Span[] = [];
    // A URL password is scrubbed wherever else the same text repeats it.
    const literals = isCredentials ? [...given, ...passwordsIn(input)] : given;
    for (const literal of literals) {
      if (literal.length < 4) continue;
      for (let at = input.indexOf(literal); at !== -1; at = input.indexOf(literal, at + 1)) {
        spans.push([at, at + literal.length]);
      }
    }
    if (isCredentials) {
      for (const match of input.matchAll(URL_PASSWORD)) {
        const [, before = '', password = ''] = match;
        if (password === REDACTED) continue;
        const start = (match.index ?? 0) + before.length;
        spans.push([start, start + password.length]);
      }
    }
    for (const pattern of patterns) {
      for (const match of input.matchAll(pattern)) {
        const start = match.index ?? 0;
        if (match[0].length > 0) spans.push([start, start + match[0].length]);
      }
    }
    return mergeSpans(spans);
  };
  const text = (input: string, literals: readonly string[] = []): Redacted =>
    replaceSpans(input, spansOf(input, literals), input.length);
  return {
    isActive: sensitive.size > 0 || patterns.length > 0,
    text,
    capped(input, cap, literals = []) {
      if (input.length <= cap) return { ...text(input, literals), truncated: false };
      const spans = spansOf(input.slice(0, cap + REDACTION_LOOKAHEAD_BYTES), literals);
      // A secret the cap falls inside is replaced whole: the cut moves to its end.
      const straddling = spans.find(([start, end]) => start < cap && end > cap);
      return { ...replaceSpans(input, spans, straddling?.[1] ?? cap), truncated: true };
    },
    secretsIn(input) {
      if (!isCredentials) return [];
      const secrets: string[] = [];
      for (const match of input.matchAll(URL_PASSWORD)) {
        const [, before = '', password = ''] = match;
        if (password === REDACTED) continue;
        const spellings = spellingsOf(password);
        secrets.push(...spellings);
        // An HTTP client sends them as `Authorization: Basic base64(user:password)`, which a
        // server may echo back.
        const user = before.slice(before.indexOf('://') + 3, -1);
        const decodedUser = spellingsOf(user).at(-1) as string;
        const basic = `${decodedUser}:${spellings.at(-1) as string}`;
        secrets.push(Buffer.from(basic, 'utf8').toString('base64'));
      }
      return secrets.sort((a, b) => b.length - a.length);
    },
    secretsOf(headers) {
      const secrets: string[] = [];
      for (const [name, value] of Object.entries(headers)) {
        if (!sensitive.has(name.toLowerCase())) continue;
        secrets.push(value);
        // "Bearer TOKEN", "Basic ...": the credential alone may be echoed back too.
        const credential = value.split(' ').at(-1);
        if (credential && credential !== value) secrets.push(credential);
        // Cookies: each value on its own.
        for (const pair of value.split(';')) {
          const cookie = pair.slice(pair.indexOf('=') + 1).trim();
          if (pair.includes('=') && cookie !== '') secrets.push(cookie);
        }
      }
      return secrets.sort((a, b) => b.length - a.length);
    },
    headers(headers, literals = []) {
      const result: Record<string, string> = {};
      const redacted: string[] = [];
      for (const [name, value] of Object.entries(headers)) {
        if (sensitive.has(name.toLowerCase())) {
          result[name] = REDACTED;
          redacted.push(name);
          continue;
        }
        const cleaned = text(value, literals);
        result[name] = cleaned.text;
        if (cleaned.count > 0) redacted.push(name);
      }
      return { headers: result, redacted };
    },
  };
}
