/** The verifier: run it, journal its verdict. */
import * as z from 'zod';
import { defineOperation } from './define-operation.js';
import { seconds, wholeNumber } from './inputs.js';

/** A verifier command, with its retries and timeout, as the inputs that give one. */
export const verifierInputs = () => ({
  verifier: z
    .string()
    .optional()
    .describe('The verifier command, run by /bin/sh -c (default: .rewind/config.json "verifier").'),
  // More retries would run the verifier for days; the library refuses them too.
  retries: wholeNumber(0)
    .max(100, { error: 'must be a whole number from 0 to 100' })
    .optional()
    .describe('Retry an unknown verdict this many times (default 0).'),
  timeout: seconds()
    .optional()
    .describe('End the verifier after this many seconds; that counts as unknown (default 600).'),
});

/** The verifier those inputs give, as the library takes it. */
export function verifierOf(command: string, retries?: number, timeout?: number) {
  return {
    command,
    ...(retries !== undefined && { retries }),
    ...(timeout !== undefined && { timeoutMs: Math.round(timeout * 1000) }),
  };
}

export const testOperation = defineOperation({
  name: 'test',
  title: 'Run the verifier',
  summary:
    "run the session's verifier, print its verdict in words, journal it; exit 0 pass, 1 fail, 3 unknown",
  description:
    "Run the workspace's verifier (tests) and get its verdict: pass, fail or unknown; the verdict is journaled. Give verifier to run another command than the configured one; retries and timeout apply to it. Under a rollback policy on test failures (policy-set), the policy's verifier runs and a fail rolls files and conversation back, which the answer says.",
  input: () => z.object(verifierInputs()),
  scope: 'session',
  // Not read-only: the verifier is a command, and whatever it does happens.
  annotations: {},
  run: async (target, { verifier, retries, timeout }) => {
    const session = await target.session();
    // Under a rollback policy on test failures (policy-set), a failed verdict rolls back.
    if (verifier === undefined && session.policies().autoRollback?.on.includes('test-failure')) {
      return session.check();
    }
    return session.test(
      verifier !== undefined ? { verifier: verifierOf(verifier, retries, timeout) } : {},
    );
  },
});
