/**
 * Input pieces several operations share, each with its message written once. Messages for one key
 * are predicates (`must be ...`); messages for a rule across keys name the keys in backticks, which
 * each edge spells its own way (`--compensate-command` on the command line).
 */
import { z } from 'zod';
import type { Compensation } from '../index.js';

/** A path relative to the workspace root (the library refuses one that escapes it). */
export const workspacePath = z
  .string()
  .describe('A path relative to the workspace root, such as "src/index.ts".');

const SECONDS = 'must be a positive number of seconds';

/** A duration in seconds, such as 0.5 or 120. */
export const seconds = z.number({ error: SECONDS }).positive({ error: SECONDS });

const ACTION_ID = 'must be an action id: the number the log shows';

/** An action id, as every action's answer and the log show it. */
export const actionId = z
  .number({ error: ACTION_ID })
  .int({ error: ACTION_ID })
  .positive({ error: ACTION_ID })
  .describe('The action id, as the answer that journaled it and the log show it.');

/** A whole number of `minimum` or more. */
export function wholeNumber(minimum: number): z.ZodNumber {
  const message = `must be a whole number of ${minimum} or more`;
  return z.number({ error: message }).int({ error: message }).min(minimum, { error: message });
}

/** How an external action or a request is offset, declared up front: `compensable` then. */
export const compensationInputs = {
  compensateCommand: z
    .string()
    .optional()
    .describe('A command (run by /bin/sh -c) that offsets it; declaring one makes it compensable.'),
  compensateRequest: z
    .string()
    .regex(/^\s*\S+\s+\S+\s*$/, {
      error: 'takes "METHOD URL", such as "DELETE https://api.example.com/deploys/42"',
    })
    .optional()
    .describe(
      'An HTTP request that offsets it, as "METHOD URL", such as "DELETE https://api.example.com/deploys/42".',
    ),
};

/** The rule across the two compensation keys: one at most. */
export function hasOneCompensation(input: {
  compensateCommand?: string | undefined;
  compensateRequest?: string | undefined;
}): boolean {
  return input.compensateCommand === undefined || input.compensateRequest === undefined;
}

/** What {@link hasOneCompensation} says when it fails. */
export const ONE_COMPENSATION = {
  error: 'Declare one compensation: `compensateCommand` or `compensateRequest`.',
};

/** The compensation the input declares, if any (its shape already checked). */
export function compensationOf(input: {
  compensateCommand?: string | undefined;
  compensateRequest?: string | undefined;
}): Compensation | undefined {
  if (input.compensateCommand !== undefined) return { command: input.compensateCommand };
  if (input.compensateRequest === undefined) return undefined;
  const [method = '', url = ''] = input.compensateRequest.trim().split(/\s+/);
  return { http: { method, url } };
}
