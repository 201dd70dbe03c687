import { RewindError } from '../../errors.js';
import type { VerificationResult } from '../../verifier/index.js';

/** How an unknown verdict that survived its retries is resolved. */
export type Resolution = 'continue' | 'rollback' | 'stop';

/** Decides what to do with an unknown verdict; see {@link stopEscalation}. */
export type EscalationHandler = (context: {
  result: VerificationResult;
  /** The checkpoint a rollback would go to. */
  checkpoint: string;
}) => Resolution | Promise<Resolution>;

/** The built-in escalation handler for agent mode: stop (a person must look). */
export const stopEscalation: EscalationHandler = () => 'stop';

/**
 * The built-in escalation handler for interactive use: asks a person what to do, through `ask`
 * (by default on the terminal: the question on stderr, the answer from stdin). Anything but
 * `c`/`continue` or `r`/`rollback` stops.
 */
export function promptEscalation(
  ask: (question: string) => Promise<string> = askOnTerminal,
): EscalationHandler {
  return async ({ result, checkpoint }) => {
    const answer = (
      await ask(
        `The verifier gave no verdict (${result.notes ?? 'unknown'}). [c]ontinue, [r]oll back to ${checkpoint}, or [s]top? `,
      )
    )
      .trim()
      .toLowerCase();
    if (answer === 'c' || answer === 'continue') return 'continue';
    if (answer === 'r' || answer === 'rollback') return 'rollback';
    return 'stop';
  };
}

async function askOnTerminal(question: string): Promise<string> {
  const { createInterface } = await import('node:readline/promises');
  const terminal = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await terminal.question(question);
  } finally {
    terminal.close();
  }
}

/**
 * The escalation handler a mode implies: `agent` stops; `interactive` asks on the terminal when
 * there is one, and stops when there is none (nobody could answer).
 */
export function escalationFor(mode: 'interactive' | 'agent'): EscalationHandler {
  if (mode !== 'agent' && mode !== 'interactive') {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `mode must be one of interactive, agent; not ${JSON.stringify(mode)}.`,
      { data: { mode } },
    );
  }
  return mode === 'interactive' && process.stdin.isTTY === true
    ? promptEscalation()
    : stopEscalation;
}

/**
 * Raised when an escalation resolves to stop: carries the checkpoint and the last verification.
 * It passes through every tool wrapper untouched.
 */
export class HaltError extends RewindError {
  /**
   * The known-good checkpoint: the one the rollback policy names, else the newest a verifier
   * passed; undefined when none was verified.
   */
  readonly checkpoint: string | undefined;
  readonly lastResult: VerificationResult;
  constructor(checkpoint: string | undefined, lastResult: VerificationResult) {
    super(
      'HALTED',
      `Stopped: the verifier gave no verdict (${lastResult.notes ?? 'unknown'}) and the escalation said stop. The workspace is as it was; ${checkpoint === undefined ? 'no checkpoint was verified as good yet' : `checkpoint "${checkpoint}" is the last known-good point`}.`,
      { data: { checkpoint, status: lastResult.status } },
    );
    this.checkpoint = checkpoint;
    this.lastResult = lastResult;
  }
}
