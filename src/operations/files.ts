/** File operations: the journaled, undoable write, delete, move and mkdir, and the plain reads. */
import * as z from 'zod';
import { defineOperation, type OperationAnnotations } from './define-operation.js';
import { isBase64, workspacePath } from './inputs.js';

const CHANGING: OperationAnnotations = { destructive: true };
const READING: OperationAnnotations = { readOnly: true };

export const writeOperation = defineOperation({
  name: 'write',
  title: 'Write a file (journaled, undoable)',
  summary: 'write a file (journaled; the previous content is kept for undo)',
  description:
    'Create or overwrite a file in the workspace, creating missing directories. The previous content is kept, so the write can be undone. Prefer this to writing files any other way.',
  input: () =>
    z
      .object({
        path: workspacePath(),
        content: z.string().describe('The whole new content of the file.'),
        encoding: z
          .enum(['utf8', 'base64'])
          .optional()
          .describe(
            'How `content` is encoded: utf8 (the default), or base64 for bytes that are not text.',
          ),
      })
      // Buffer.from would drop what is not base64 and write what is left, quietly.
      .refine((input) => input.encoding !== 'base64' || isBase64(input.content), {
        path: ['content'],
        error:
          'must be base64 (encoding base64): only A-Z, a-z, 0-9, + and / (or - and _), padded with = at the end if at all',
      }),
  scope: 'session',
  isToolCall: true,
  annotations: CHANGING,
  run: async (target, { path, content, encoding }) =>
    (await target.session()).write(
      path,
      encoding === 'base64' ? Buffer.from(content, 'base64') : content,
    ),
});

export const deleteOperation = defineOperation({
  name: 'delete',
  title: 'Delete a file or directory tree (journaled, undoable)',
  summary: 'delete a file or a directory tree (journaled; everything is kept for undo)',
  description:
    'Delete a file, a symbolic link or a whole directory. Everything is kept, so it can be undone.',
  input: () => z.object({ path: workspacePath() }),
  scope: 'session',
  isToolCall: true,
  annotations: CHANGING,
  run: async (target, { path }) => (await target.session()).delete(path),
});

export const moveOperation = defineOperation({
  name: 'move',
  title: 'Move or rename (journaled, undoable)',
  summary: 'move or rename a file or directory (journaled)',
  description:
    'Move or rename a file or directory. The destination must be free (or a file, when moving a file).',
  input: () => z.object({ from: workspacePath(), to: workspacePath() }),
  scope: 'session',
  isToolCall: true,
  annotations: CHANGING,
  run: async (target, { from, to }) => (await target.session()).move(from, to),
});

export const mkdirOperation = defineOperation({
  name: 'mkdir',
  title: 'Create a directory (journaled, undoable)',
  summary: 'create a directory and its missing parents (journaled)',
  description: 'Create a directory and its missing parents.',
  input: () => z.object({ path: workspacePath() }),
  scope: 'session',
  isToolCall: true,
  annotations: {},
  run: async (target, { path }) => (await target.session()).mkdir(path),
});

export const readOperation = defineOperation({
  name: 'read',
  title: 'Read a file',
  summary: "print a text file of the session's workspace (not journaled)",
  description: 'Read a text file of the workspace (not journaled).',
  input: () => z.object({ path: workspacePath() }),
  scope: 'session',
  annotations: READING,
  run: async (target, { path }) => (await target.session()).read(path),
});

export const listOperation = defineOperation({
  name: 'list',
  title: 'List a directory',
  summary: "list a directory of the session's workspace, directories marked with / (not journaled)",
  description:
    'List the entries of a workspace directory, directories marked with a trailing "/" (not journaled).',
  input: () =>
    z.object({
      path: z
        .string()
        .default('.')
        .describe('A directory relative to the workspace root; "." for the root.'),
    }),
  scope: 'session',
  annotations: READING,
  run: async (target, { path }) => (await target.session()).list(path),
});
