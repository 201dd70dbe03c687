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

/** Options of {@link createRedactor}. */
export interface RedactionOptions {
  /** Redact the values of {@link SENSITIVE_HEADERS}. */
  headers?: boolean;
  /** Regular expressions (source text) whose matches are redacted in every text kept. */
  patterns?: readonly string[];
}

/** Strips secrets from what is about to be hashed or stored. */
export interface Redactor {
  readonly isActive: boolean;
  /**
   * The text with every pattern match replaced, and every occurrence of `literals` (secret
   * values already known, such as a redacted header's, echoed back), and how many were.
   */
  text(text: string, literals?: readonly string[]): { text: string; count: number };
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
  const text = (
    input: string,
    literals: readonly string[] = [],
  ): { text: string; count: number } => {
    let count = 0;
    let output = input;
    for (const literal of literals) {
      if (literal.length < 4) continue;
      const parts = output.split(literal);
      count += parts.length - 1;
      output = parts.join(REDACTED);
    }
    for (const pattern of patterns) {
      output = output.replace(pattern, () => {
        count += 1;
        return REDACTED;
      });
    }
    return { text: output, count };
  };
  return {
    isActive: sensitive.size > 0 || patterns.length > 0,
    text,
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
