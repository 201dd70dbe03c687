import { RewindError } from '../../errors.js';
import type { Redactor } from '../../lib/index.js';
import { type Command, checkRequest, type HttpRequest } from '../../sandbox/index.js';
import type { ActionClass, ActionState, PathChange } from '../journal/action-records.js';

/** What a file action or a command did: its id (for `undo`), class and the paths it changed. */
export interface ActionResult {
  id: number;
  kind: string;
  class: ActionClass;
  state: ActionState;
  target: string;
  /** The paths the action changed, with their state before and after. */
  changes: PathChange[];
  warnings: string[];
}

/** A compensation, declared up front: a command run in the workspace, or an HTTP request. */
export type Compensation = { command: Command } | { http: HttpRequest };

/** The exact content of an action that can be drafted: what approval runs. */
export type ActionSpec = ExecSpec | HttpSpec | RecordSpec;

/** A command as it will run. */
export interface ExecSpec {
  action: 'exec';
  command: Command;
  timeoutMs: number;
  env?: Record<string, string>;
  maxOutputBytes?: number;
}

/** A request as it will be sent (the body in base64). */
export interface HttpSpec {
  action: 'http';
  request: { method: string; url: string; headers?: Record<string, string>; body?: string };
  timeoutMs: number;
  compensation?: Compensation;
}

/** An external action as recorded. */
export interface RecordSpec {
  action: `x.${string}`;
  target: string;
  detail?: string;
  compensation?: Compensation;
}

/** Checks a declared compensation. Throws `INVALID_ARGUMENT` for an empty command or a bad request. */
export function checkCompensation(compensation: Compensation): void {
  if ('command' in compensation) {
    const text =
      typeof compensation.command === 'string'
        ? compensation.command
        : compensation.command.join('');
    if (text === '')
      throw new RewindError('INVALID_ARGUMENT', 'The compensation command is empty.');
  } else {
    checkRequest(compensation.http);
  }
}

/** The result of an action that changed no file: `changes` and `warnings` empty. */
export function actionResult(
  fields: Pick<ActionResult, 'id' | 'kind' | 'class' | 'state' | 'target'>,
): ActionResult {
  return { ...fields, changes: [], warnings: [] };
}

/** What an action acts on, for people and the ledger: redacted. */
export function targetOf(redactor: Redactor, spec: ActionSpec): string {
  if (spec.action === 'exec') {
    const text = typeof spec.command === 'string' ? spec.command : spec.command.join(' ');
    return redactor.text(text).text;
  }
  if (spec.action === 'http') {
    return `${spec.request.method} ${redactor.text(spec.request.url).text}`;
  }
  return redactor.text(spec.target).text;
}

function journaledCompensation(
  redactor: Redactor,
  compensation: Compensation,
): Record<string, unknown> {
  if ('command' in compensation) {
    const command = compensation.command;
    return {
      command:
        typeof command === 'string'
          ? redactor.text(command).text
          : command.map((word) => redactor.text(word).text),
    };
  }
  const request = compensation.http;
  return {
    http: {
      method: request.method,
      url: redactor.text(request.url).text,
      headers: redactor.headers(request.headers ?? {}).headers,
    },
  };
}

/** What the ledger keeps of a spec: redacted, and without environment values. */
export function journaledSpec(redactor: Redactor, spec: ActionSpec): Record<string, unknown> {
  const target = targetOf(redactor, spec);
  if (spec.action === 'exec') {
    return {
      action: 'exec',
      target,
      command:
        typeof spec.command === 'string'
          ? redactor.text(spec.command).text
          : spec.command.map((word) => redactor.text(word).text),
      timeoutMs: spec.timeoutMs,
      ...(spec.env && { env: Object.keys(spec.env) }),
      outsideWorkspace: 'unknown',
      ...(target !== (typeof spec.command === 'string' ? spec.command : spec.command.join(' ')) && {
        redacted: ['command'],
      }),
    };
  }
  if (spec.action === 'http') {
    const { headers, redacted } = redactor.headers(spec.request.headers ?? {});
    const isUrlRedacted = target !== `${spec.request.method} ${spec.request.url}`;
    return {
      action: 'http',
      target,
      request: {
        method: spec.request.method,
        url: redactor.text(spec.request.url).text,
        headers,
        ...(spec.request.body !== undefined && {
          bodyBytes: Buffer.from(spec.request.body, 'base64').length,
        }),
      },
      ...((redacted.length > 0 || isUrlRedacted) && {
        redacted: [
          ...(isUrlRedacted ? ['request.url'] : []),
          ...redacted.map((name) => `request.headers.${name}`),
        ],
      }),
      ...(spec.compensation && {
        compensation: journaledCompensation(redactor, spec.compensation),
      }),
    };
  }
  return {
    action: spec.action,
    target,
    ...(spec.detail !== undefined && { detail: redactor.text(spec.detail).text }),
    ...(spec.compensation && {
      compensation: journaledCompensation(redactor, spec.compensation),
    }),
  };
}

/**
 * Output read past its cap (up to `REDACTION_LOOKAHEAD_BYTES` more), redacted, then cut to `cap`
 * (see `Redactor.capped`): a secret the cap falls inside is replaced whole, never stored in part.
 * Matched on a byte-for-byte decoding.
 */
export function redactCapped(
  redactor: Redactor,
  bytes: Buffer,
  cap: number,
  literals: readonly string[] = [],
): { bytes: Buffer; count: number; truncated: boolean } {
  if (bytes.length <= cap && !redactor.isActive) return { bytes, count: 0, truncated: false };
  const { text, count, truncated } = redactor.capped(bytes.toString('latin1'), cap, literals);
  return { bytes: count > 0 || truncated ? Buffer.from(text, 'latin1') : bytes, count, truncated };
}

/** Bytes with every redaction pattern match replaced (matched on a byte-for-byte decoding). */
export function redactBytes(
  redactor: Redactor,
  bytes: Buffer,
  literals: readonly string[] = [],
): { bytes: Buffer; count: number } {
  if (!redactor.isActive) return { bytes, count: 0 };
  const { text, count } = redactor.text(bytes.toString('latin1'), literals);
  return { bytes: count > 0 ? Buffer.from(text, 'latin1') : bytes, count };
}
