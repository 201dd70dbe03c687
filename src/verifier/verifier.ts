import { RewindError } from '../errors.js';
import { jsonPreview, timerDelayOf } from '../lib/index.js';

/** A verifier's verdict. `unknown` is never treated as `pass`. */
export type VerificationStatus = 'pass' | 'fail' | 'unknown';

/** What one run of a verifier said. */
export interface Verdict {
  status: VerificationStatus;
  summary: string | undefined;
  errors: string[];
  /** Why the verdict is unknown (no JSON, a status that is not one of the three, a timeout...). */
  notes: string | undefined;
}

/** What a verifier run printed and how it ended: the command runner's result, reduced. */
export interface VerifierOutput {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  timedOut: boolean;
}

/** A verification, after retries: the last verdict and every attempt's. */
export interface VerificationResult extends Verdict {
  attempts: (Verdict & { exitCode: number | null; stdout: string; stderr: string })[];
}

/** A verifier: a command run in the session's workspace (through its sandbox). */
export interface VerifierConfig {
  /** A string runs through `/bin/sh -c`; an argv as is. */
  command: string | readonly string[];
  /** How many more times an `unknown` verdict is retried. Default 0. */
  retries?: number;
  /** The pause between retries. Default 1,000 ms. */
  retryDelayMs?: number;
  /** A run that takes longer is ended (its whole process tree) and counts as unknown. Default 600,000 ms. */
  timeoutMs?: number;
}

const STATUSES = new Set<string>(['pass', 'fail', 'unknown']);

/** The most retries of an unknown verdict: more would run the verifier for days. */
export const MAX_RETRIES = 100;

/**
 * Reads a verdict from a verifier's output: the JSON object it prints on stdout (`status`: pass,
 * fail or unknown; optional `summary` and `errors`, an error that is not a string kept as its
 * JSON). The exit code is recorded but never decides.
 * Output that carries no valid verdict (no JSON, an array, several objects, a status not one of
 * the three, a timeout) is `unknown`, with a note saying why.
 */
export function parseVerdict(output: VerifierOutput): Verdict {
  const unknown = (notes: string): Verdict => ({
    status: 'unknown',
    summary: undefined,
    errors: [],
    notes,
  });
  if (output.timedOut) return unknown('The verifier did not finish in time and was ended.');
  const text = output.stdout.trim();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // The verdict may follow other output: take the last line that is a JSON object.
    const last = text
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('{') && line.endsWith('}'))
      .at(-1);
    if (last === undefined) {
      return unknown(
        `The verifier printed no JSON verdict on stdout (exit ${output.exitCode}); it must print {"status": "pass" | "fail" | "unknown"}.`,
      );
    }
    const objects = text
      .split('\n')
      .filter((line) => line.trim().startsWith('{') && line.trim().endsWith('}'));
    if (objects.length > 1) {
      return unknown(
        `The verifier printed ${objects.length} JSON objects; exactly one verdict is expected.`,
      );
    }
    try {
      value = JSON.parse(last);
    } catch {
      return unknown('The verifier printed something like JSON that does not parse.');
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return unknown('The verifier printed JSON that is not an object with a "status".');
  }
  const record = value as Record<string, unknown>;
  if (typeof record.status !== 'string' || !STATUSES.has(record.status)) {
    return unknown(
      `The verifier's status ${jsonPreview(record.status)} is not pass, fail or unknown.`,
    );
  }
  // An error that is not a string (an object naming a file and a line) is kept as its JSON.
  const errors = Array.isArray(record.errors)
    ? record.errors.map((error) => (typeof error === 'string' ? error : jsonPreview(error, 2_000)))
    : [];
  return {
    status: record.status as VerificationStatus,
    summary: typeof record.summary === 'string' ? record.summary : undefined,
    errors,
    notes: typeof record.notes === 'string' ? record.notes : undefined,
  };
}

/**
 * Runs a verifier through `run` (the session's sandbox), retrying an `unknown` verdict up to
 * `retries` times (at most {@link MAX_RETRIES}) with `retryDelayMs` between; `pass` and `fail` are
 * final at once. Throws `INVALID_ARGUMENT` for retries that are not a whole number from 0 to 100.
 */
export async function runVerifier(
  config: VerifierConfig,
  run: (command: string | readonly string[], timeoutMs: number) => Promise<VerifierOutput>,
): Promise<VerificationResult> {
  const retries = config.retries ?? 0;
  if (!Number.isInteger(retries) || retries < 0 || retries > MAX_RETRIES) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `retries must be a whole number from 0 to ${MAX_RETRIES}, not ${retries}.`,
      {
        data: { retries },
      },
    );
  }
  const attempts: VerificationResult['attempts'] = [];
  for (let attempt = 0; attempt <= retries; attempt++) {
    if (attempt > 0)
      await new Promise((resolve) =>
        setTimeout(resolve, timerDelayOf(config.retryDelayMs ?? 1000)),
      );
    const output = await run(config.command, config.timeoutMs ?? 600_000);
    const verdict = parseVerdict(output);
    attempts.push({
      ...verdict,
      exitCode: output.exitCode,
      stdout: output.stdout,
      stderr: output.stderr,
    });
    if (verdict.status !== 'unknown') break;
  }
  const last = attempts.at(-1) as VerificationResult['attempts'][number];
  return {
    status: last.status,
    summary: last.summary,
    errors: last.errors,
    notes: last.notes,
    attempts,
  };
}

/**
 * A verdict in words, for a person or a model: the summary of a pass (or "Verification
 * passed."), "Failed:" and the errors of a fail (or "Verification failed"), the notes of an
 * unknown.
 */
export function formatVerification(verdict: Verdict): string {
  if (verdict.status === 'pass') return verdict.summary ?? 'Verification passed.';
  if (verdict.status === 'fail') {
    if (verdict.errors.length === 0) return verdict.summary ?? 'Verification failed';
    return `${verdict.summary ?? 'Failed'}:\n${verdict.errors.map((error) => `  - ${error}`).join('\n')}`;
  }
  return verdict.notes ?? 'The verifier gave no verdict.';
}
