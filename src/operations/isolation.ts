/** Isolated sessions: committing the view to the workspace, and removing the view. */
import * as z from 'zod';
import { defineOperation } from './define-operation.js';

export const commitOperation = defineOperation({
  name: 'commit',
  title: 'Commit an isolated session to the workspace',
  summary:
    "apply an isolated session's changes to the workspace, refusing when the workspace changed the same paths",
  description:
    "Apply the isolated session's changes to the real workspace; refused, listing conflicts, when the workspace changed the same files. With dryRun: true, lists what would change and every conflict.",
  input: () =>
    z.object({
      dryRun: z
        .boolean()
        .optional()
        .describe('List what would be written, created and deleted, and every conflict.'),
    }),
  scope: 'session',
  annotations: { destructive: true },
  run: async (target, { dryRun }) => {
    const { progress } = target;
    return (await target.session()).commit({
      dryRun: dryRun === true,
      ...(progress && {
        onProgress: ({ done, total }) => progress({ step: 'committing', done, total }),
      }),
    });
  },
});

export const destroyOperation = defineOperation({
  name: 'destroy',
  title: "Remove an isolated session's view",
  summary: "remove an isolated session's view (refused while it holds uncommitted changes)",
  description:
    "Remove an isolated session's view; refused while it holds uncommitted changes unless forced (they stay in the store).",
  input: () =>
    z.object({
      force: z.boolean().optional().describe('Drop uncommitted changes (they stay in the store).'),
    }),
  scope: 'session',
  annotations: { destructive: true },
  excludedFrom: {
    mcp: "it ends the server's own session and drops its view: a person decides when the work is over",
  },
  run: async (target, { force }): Promise<{ destroyed: true; wasCurrent: boolean }> => {
    const { wasCurrent } = await (await target.session()).destroy({ force: force === true });
    return { destroyed: true, wasCurrent };
  },
});
