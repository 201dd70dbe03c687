/**
 * What a person decides about an agent's actions: running a draft, discarding it, running a
 * compensation. Left off the MCP server: an agent must not approve its own drafts.
 */
import * as z from 'zod';
import type { ActionResult, Compensation, DraftInfo } from '../index.js';
import { defineOperation } from './define-operation.js';
import { actionId } from './inputs.js';

const A_PERSON_DECIDES =
  'a person approves or declines what an agent drafted or declared: an agent must not approve its own actions';

export const approveOperation = defineOperation({
  name: 'approve',
  title: 'Approve a draft',
  summary: 'show exactly what a draft will run, and run it once confirmed',
  description:
    'Run a draft exactly as it was journaled. With digest, only if its content still has that digest; with dryRun: true, only show what it will run.',
  input: () =>
    z.object({
      id: actionId(),
      digest: z
        .string()
        .optional()
        .describe('Run it only if its content has this digest (as a dry run shows it).'),
      dryRun: z.boolean().optional().describe('Show exactly what it will run, and run nothing.'),
    }),
  scope: 'session',
  annotations: { destructive: true, openWorld: true },
  excludedFrom: { mcp: A_PERSON_DECIDES },
  run: async (target, { id, digest, dryRun }): Promise<DraftInfo | ActionResult> => {
    const session = await target.session();
    return dryRun === true
      ? session.draft(id)
      : session.approve(id, { ...(digest !== undefined && { digest }) });
  },
});

export const discardOperation = defineOperation({
  name: 'discard',
  title: 'Discard a draft',
  summary: 'discard a draft, visibly and for good',
  description: 'Discard a draft, visibly (it stays in the ledger) and for good: it never runs.',
  input: () => z.object({ id: actionId() }),
  scope: 'session',
  annotations: {},
  excludedFrom: { mcp: A_PERSON_DECIDES },
  run: async (target, { id }) => (await target.session()).discard(id),
});

export const compensateOperation = defineOperation({
  name: 'compensate',
  title: 'Compensate an action',
  summary: 'show the compensation a compensable action declared, and run it once confirmed',
  description:
    'Run the compensation a compensable action declared, as an action of its own. With dryRun: true, only show it.',
  input: () =>
    z.object({
      id: actionId(),
      dryRun: z.boolean().optional().describe('Show the compensation, and run nothing.'),
    }),
  scope: 'session',
  annotations: { destructive: true, openWorld: true },
  excludedFrom: { mcp: A_PERSON_DECIDES },
  run: async (target, { id, dryRun }): Promise<Compensation | ActionResult> => {
    const session = await target.session();
    return dryRun === true ? session.compensation(id) : session.compensate(id);
  },
});
