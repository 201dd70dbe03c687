/** Isolated sessions: committing the view to the workspace, and removing the view. */
import * as z from 'zod';
import { defineOperation } from './define-operation.js';

export const commitOperation = defineOperation({
  name: 'commit',
  title: 'Commit an isolated session to the workspace',
  summary:
    "apply an isolated session's changes to the workspace, refusing when the workspace changed the same paths",
  description:
    "Apply the isolated session's changes to the real workspace; refused, listing conflicts, when the workspace changed the same files. With dryRun: true, lists what would change and every conflict; with diff: true too, shows it as a unified diff of the workspace's files now against what the commit would write (conflicting paths are listed, not diffed).",
  input: () =>
    z
      .object({
        dryRun: z
          .boolean()
          .optional()
          .describe('List what would be written, created and deleted, and every conflict.'),
        diff: z
          .boolean()
          .optional()
          .describe(
            "With dryRun: also a unified diff from the workspace's files now to what the commit would write.",
          ),
      })
      .refine((input) => input.diff !== true || input.dryRun === true, {
        error: '`diff` shows a plan, before a commit: give it with `dryRun`.',
      }),
  scope: 'session',
  annotations: { destructive: true },
  run: async (target, { dryRun, diff }) => {
    const { progress } = target;
    return (await target.session()).commit({
      dryRun: dryRun === true,
      diff: diff === true,
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
