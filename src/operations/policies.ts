/** The session's policies: read them, and set them for the calls an agent makes next. */
import * as z from 'zod';
import type { SessionPolicies } from '../index.js';
import { defineOperation } from './define-operation.js';
import { unionError, wholeNumber } from './inputs.js';
import { verifierInputs, verifierOf } from './verification.js';

const WHY_NOT_ON_THE_CLI =
  'a policy lasts as long as the process that holds the session: a command line ends with its command (the library and the MCP server keep one)';

export const policyShowOperation = defineOperation({
  name: 'policy-show',
  title: 'Show the policies',
  summary: "show the session's automatic checkpoint and rollback policies",
  description:
    'The policies on now: autoCheckpoint (a checkpoint before each call that changes something, keeping the last keepLast) and autoRollback (on a failed call or a failed verdict, roll back to a checkpoint; its verifier), or null for one that is off.',
  input: () => z.object({}),
  scope: 'session',
  annotations: { readOnly: true },
  excludedFrom: { cli: WHY_NOT_ON_THE_CLI },
  run: async (target): Promise<SessionPolicies> => (await target.session()).policies(),
});

export const policySetOperation = defineOperation({
  name: 'policy-set',
  title: 'Set the policies',
  summary: "turn the session's automatic checkpoint and rollback policies on or off",
  description:
    'Turn policies on (an object) or off (false); a policy left out stays as it is. autoCheckpoint: a checkpoint before each write, delete, move, mkdir, exec and http call, keeping the newest keepLast automatic ones. autoRollback: when such a call fails (on "exception") or the test tool gets a fail verdict (on "test-failure"), files and conversation roll back to "to" (default "latest": the newest checkpoint not already broken), and the answer says so; verifier is the command the test tool then runs. Returns the policies now.',
  input: () =>
    z.object({
      autoCheckpoint: z
        .union(
          [
            z.literal(false),
            z.object({
              keepLast: wholeNumber(1)
                .optional()
                .describe('Keep the newest this many automatic checkpoints (default: all).'),
            }),
          ],
          { error: unionError('must be false (off) or an object (on), such as {"keepLast": 5}') },
        )
        .optional()
        .describe('On (an object) or off (false).'),
      autoRollback: z
        .union(
          [
            z.literal(false),
            z.object({
              on: z
                .array(z.enum(['exception', 'test-failure']))
                .optional()
                .describe('When to roll back (default: both).'),
              to: z
                .string()
                .optional()
                .describe(
                  'A checkpoint label, or "latest" (default): the newest not already broken.',
                ),
              scope: z
                .enum(['both', 'files', 'conversation'])
                .optional()
                .describe('What to restore (default: both).'),
              ...verifierInputs(),
            }),
          ],
          {
            error: unionError(
              'must be false (off) or an object (on), such as {"on": ["test-failure"]}',
            ),
          },
        )
        .optional()
        .describe('On (an object) or off (false).'),
    }),
  scope: 'session',
  annotations: { idempotent: true },
  excludedFrom: { cli: WHY_NOT_ON_THE_CLI },
  run: async (target, { autoCheckpoint, autoRollback }): Promise<SessionPolicies> => {
    const session = await target.session();
    if (autoCheckpoint !== undefined) {
      session.autoCheckpoint(
        autoCheckpoint === false
          ? false
          : { ...(autoCheckpoint.keepLast !== undefined && { keepLast: autoCheckpoint.keepLast }) },
      );
    }
    if (autoRollback !== undefined) {
      if (autoRollback === false) session.autoRollback(false);
      else {
        const { on, to, scope, verifier, retries, timeout } = autoRollback;
        session.autoRollback({
          ...(on !== undefined && { on }),
          ...(to !== undefined && { to }),
          ...(scope !== undefined && { scope }),
          ...(verifier !== undefined && { verifier: verifierOf(verifier, retries, timeout) }),
        });
      }
    }
    return session.policies();
  },
});
