/** Actions beyond files: commands, HTTP requests, and external actions recorded and reported. */
import * as z from 'zod';
import { defineOperation } from './define-operation.js';
import {
  actionId,
  compensationInputs,
  compensationOf,
  hasOneCompensation,
  ONE_COMPENSATION,
  seconds,
  unionError,
} from './inputs.js';

const draft = () => z.boolean().optional();

export const execOperation = defineOperation({
  name: 'exec',
  title: 'Run a command (journaled; its file changes are undoable)',
  summary:
    'run a command in the workspace, journaled with the files it created, modified and deleted (undoable)',
  description:
    'Run a command in the workspace: a string runs through /bin/sh -c, an array of words as is. The files it creates, modifies and deletes are recorded and can be undone. With draft: true it is only journaled, and a person approves it.',
  input: () =>
    z.object({
      command: z
        .union([z.string(), z.array(z.string())], {
          error: unionError(
            'must be a shell command (a string) or a program and its arguments (an array of strings)',
          ),
        })
        .describe('A shell command (run by /bin/sh -c), or a program and its arguments.'),
      timeout: seconds()
        .optional()
        .describe(
          'End the command and everything it started after this many seconds (default 120).',
        ),
      draft: draft().describe('Journal it for a person to approve instead of running it.'),
    }),
  scope: 'session',
  isToolCall: true,
  annotations: { destructive: true, openWorld: true },
  run: async (target, { command, timeout, draft: isDraft }) => {
    const session = await target.session();
    const timeoutMs = timeout === undefined ? target.defaults.execTimeoutMs : timeout * 1000;
    const options = { ...(timeoutMs !== undefined && { timeoutMs: Math.round(timeoutMs) }) };
    return isDraft === true
      ? session.exec(command, { ...options, draft: true })
      : session.exec(command, options);
  },
});

export const httpOperation = defineOperation({
  name: 'http',
  title: 'Send an HTTP request (journaled; irreversible unless compensated)',
  summary:
    'send an HTTP request, journaled with its response (irreversible unless a compensation is declared)',
  description:
    'Send an HTTP request. Cloud metadata, link-local and reserved addresses are refused. It cannot be undone: declare a compensation (a command or a request that offsets it) to make it compensable, or use draft: true so that a person approves it first.',
  input: () =>
    z
      .object({
        method: z.string().describe('GET, POST, ...'),
        url: z.string().describe('An absolute http:// or https:// URL.'),
        headers: z.record(z.string(), z.string()).optional(),
        body: z.string().optional(),
        timeout: seconds().optional().describe('Give up after this many seconds (default 30).'),
        ...compensationInputs(),
        draft: draft().describe('Journal it for a person to approve instead of sending it.'),
      })
      .refine(hasOneCompensation, ONE_COMPENSATION),
  scope: 'session',
  isToolCall: true,
  annotations: { destructive: true, openWorld: true },
  run: async (target, input) => {
    const timeoutMs =
      input.timeout === undefined ? target.defaults.httpTimeoutMs : input.timeout * 1000;
    const compensation = compensationOf(input);
    return (await target.session()).http(
      {
        method: input.method,
        url: input.url,
        ...(input.headers && { headers: input.headers }),
        ...(input.body !== undefined && { body: input.body }),
      },
      {
        ...(timeoutMs !== undefined && { timeoutMs: Math.round(timeoutMs) }),
        ...(compensation && { compensation }),
        ...(input.draft === true && { draft: true }),
      },
    );
  },
});

export const recordOperation = defineOperation({
  name: 'record',
  title: 'Record an external action before doing it',
  summary:
    'journal an external action before doing it (kind x.NAME); close it with `rewind report`',
  description:
    'Journal something you are about to do outside the workspace (a deploy, an email), with what would offset it if there is one. Report its outcome with the report tool.',
  input: () =>
    z
      .object({
        name: z.string().describe('What it is, such as deploy or send-email.'),
        class: z
          .enum(['compensable', 'irreversible'])
          .optional()
          .describe('Default: compensable when a compensation is declared, else irreversible.'),
        ...compensationInputs(),
        target: z.string().optional().describe('What it acts on, for people (default: the name).'),
        detail: z.string().optional(),
        draft: draft().describe('Journal it for a person to approve first.'),
      })
      .refine(hasOneCompensation, ONE_COMPENSATION),
  scope: 'session',
  annotations: { openWorld: true },
  run: async (target, input) => {
    const compensation = compensationOf(input);
    return (await target.session()).record(input.name, {
      ...(input.class !== undefined && { class: input.class }),
      ...(compensation && { compensation }),
      ...(input.target !== undefined && { target: input.target }),
      ...(input.detail !== undefined && { detail: input.detail }),
      ...(input.draft === true && { draft: true }),
    });
  },
});

export const reportOperation = defineOperation({
  name: 'report',
  title: 'Report the outcome of a recorded action',
  summary: 'close a recorded external action with its outcome',
  description: 'Close an action journaled with record: did it succeed?',
  input: () =>
    z.object({
      id: actionId(),
      ok: z.boolean().describe('Whether it succeeded.'),
      detail: z.string().optional().describe('What happened.'),
    }),
  scope: 'session',
  annotations: {},
  run: async (target, { id, ok, detail }) =>
    (await target.session()).report(id, { ok, ...(detail !== undefined && { detail }) }),
});

export const showOperation = defineOperation({
  name: 'show',
  title: 'Show what an action stored',
  summary:
    "show what an action stored: a command's output and how it ended, a request and its response",
  description:
    "What an action stored, as stored (redacted where the session redacts): a command's exit status, stdout and stderr; a request's method, URL, headers and body and the response's status, headers and body; for any other action, its ledger entries. Changes nothing.",
  input: () => z.object({ id: actionId() }),
  scope: 'session',
  annotations: { readOnly: true },
  run: async (target, { id }) => (await target.session()).show(id),
});
