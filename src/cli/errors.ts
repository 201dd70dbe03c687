/** How the CLI reports what went wrong: on stderr for people, as a document for `--json`. */
import { asRewindError, isRewindError } from '../index.js';

/** A mistake in how a command was called, found in its action (Commander reports its own): exit 2. */
export class UsageError extends Error {}

/** The error for people: the message and its code, and with `isDebug` every stack of the cause chain. */
export function describeError(error: unknown, isDebug: boolean): string {
  const lines: string[] = [];
  const known = asRewindError(error);
  if (known) {
    lines.push(`rewind: ${known.message} [${known.code}]`);
  } else {
    lines.push(
      `rewind: unexpected error: ${error instanceof Error ? error.message : String(error)}. ` +
        'Run again with --debug for the details, and please report it.',
    );
  }
  if (isDebug) {
    for (let current: unknown = error; current !== undefined; ) {
      lines.push(current instanceof Error ? (current.stack ?? String(current)) : String(current));
      current = current instanceof Error ? current.cause : undefined;
      if (current !== undefined) lines.push('caused by:');
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The `--json` document of a failure: `{ error: { code, message, data } }`. */
export function errorDocument(error: unknown): Record<string, unknown> {
  const known = asRewindError(error);
  if (known) return { error: { code: known.code, message: known.message, data: known.data } };
  return {
    error: { code: 'UNEXPECTED', message: error instanceof Error ? error.message : String(error) },
  };
}

/** The `--json` document of a usage error: code `USAGE`. */
export function usageDocument(message: string): Record<string, unknown> {
  return { error: { code: 'USAGE', message, data: {} } };
}

/** A `JSON.stringify` replacer that writes errors inside results as their code and message. */
export function jsonReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    return isRewindError(value)
      ? { code: value.code, message: value.message }
      : { message: value.message };
  }
  return value;
}
