import { isUtf8 } from 'node:buffer';
import { isRewindError, RewindError } from '../../errors.js';
import { REDACTION_LOOKAHEAD_BYTES } from '../../lib/index.js';
import {
  checkRequest,
  checkTarget,
  DEFAULT_MAX_BODY_BYTES,
  type HttpRequest,
  type HttpResponse,
  performRequest,
} from '../../sandbox/index.js';
import type { SessionContext } from '../context.js';
import type { ActionClass } from '../journal/action-records.js';
import { type Journal, withWorkspaceLock } from '../journal/journal.js';
import {
  type ActionResult,
  type Compensation,
  checkCompensation,
  type HttpSpec,
  journaledSpec,
  redactBytes,
  redactCapped,
  targetOf,
} from './journaled-spec.js';
import { keepCompensation } from './verbatim.js';

/** Options of `Session.http`. */
export interface HttpActionOptions {
  /** The whole exchange must end within this. Default 30 000 ms. */
  timeoutMs?: number;
  /** Makes the request `compensable`: what offsets it, run by `Session.compensate`. */
  compensation?: Compensation;
  /** Journal it without sending it; `Session.approve` sends it. */
  draft?: boolean;
}

/** What `Session.http` did: the response (redacted as the session says), unless a draft. */
export interface HttpResult extends ActionResult {
  /** `body` as UTF-8 text; `bodyBase64`, its exact bytes, too when they are not UTF-8. */
  response:
    | {
        status: number;
        headers: Record<string, string>;
        body: string;
        bodyTruncated: boolean;
        bodyBase64?: string;
      }
    | undefined;
}

/**
 * The request as it will be sent, defaults applied. Throws `INVALID_ARGUMENT` for a malformed
 * URL, method or header, or compensation.
 */
export function httpSpecOf(
  context: SessionContext,
  request: HttpRequest,
  options: HttpActionOptions,
): HttpSpec {
  checkRequest(request);
  if (options.compensation) checkCompensation(options.compensation);
  return {
    action: 'http',
    request: {
      method: request.method.toUpperCase(),
      url: request.url,
      ...(request.headers && { headers: request.headers }),
      ...(request.body !== undefined && { body: Buffer.from(request.body).toString('base64') }),
    },
    timeoutMs: options.timeoutMs ?? context.settings.httpTimeoutMs,
    ...(options.compensation && { compensation: options.compensation }),
  };
}

/**
 * Refuses, before anything is journaled, a target with no legitimate use (and a private one with
 * `blockPrivate`). Throws `ADDRESS_REFUSED`.
 */
export async function checkRequestTarget(context: SessionContext, spec: HttpSpec): Promise<void> {
  await checkTarget(new URL(spec.request.url), context.settings.blockPrivate);
}

/** Journals a request and sends it; see `Session.http`. */
export async function sendRequest(
  context: SessionContext,
  spec: HttpSpec,
  actionClass: ActionClass,
): Promise<HttpResult> {
  // Refused targets never reach the ledger: nothing was attempted.
  await checkRequestTarget(context, spec);
  return withWorkspaceLock(
    context,
    `requesting ${targetOf(context.redactor, spec)}`,
    async (journal) => {
      const started = await journal.append('action-started', {
        ...journaledSpec(context.redactor, spec),
        ...(await keepCompensation(context, spec)),
        class: actionClass,
      });
      return runRequestAction(context, journal, started.seq, spec, actionClass);
    },
  );
}

/** Sends a journaled request and closes its action with the exchange as evidence. */
export async function runRequestAction(
  context: SessionContext,
  journal: Journal,
  id: number,
  spec: HttpSpec,
  actionClass: ActionClass,
): Promise<HttpResult> {
  const redactor = context.redactor;
  let response: HttpResponse;
  try {
    response = await performRequest(
      {
        method: spec.request.method,
        url: spec.request.url,
        headers: spec.request.headers ?? {},
        ...(spec.request.body !== undefined && {
          body: Buffer.from(spec.request.body, 'base64'),
        }),
      },
      {
        timeoutMs: spec.timeoutMs,
        blockPrivate: context.settings.blockPrivate,
        // Read past the cap, so that a secret the cap cuts is redacted whole, not stored in part.
        maxBodyBytes: DEFAULT_MAX_BODY_BYTES + REDACTION_LOOKAHEAD_BYTES,
      },
    );
  } catch (error) {
    const code = isRewindError(error) ? error.code : 'HTTP_FAILED';
    await journal.append('action-failed', {
      startedSeq: id,
      error: {
        code,
        message: redactor.text(error instanceof Error ? error.message : String(error)).text,
      },
    });
    // The action was journaled: the error names it, so that a caller can say how it ended.
    if (isRewindError(error)) {
      throw new RewindError(error.code, error.message, {
        data: { ...error.data, actionId: id, actionClass },
        cause: error.cause,
      });
    }
    throw error;
  }
  // Secret values the request carried are scrubbed wherever they come back, too.
  const secrets = [
    ...redactor.secretsOf(spec.request.headers ?? {}),
    ...redactor.secretsOf(response.headers),
    ...redactor.secretsIn(spec.request.url),
  ];
  const { headers, redacted } = redactor.headers(response.headers, secrets);
  const body = redactCapped(redactor, response.body, DEFAULT_MAX_BODY_BYTES, secrets);
  const bodyTruncated = response.bodyTruncated || body.truncated;
  const sent = redactBytes(redactor, Buffer.from(spec.request.body ?? '', 'base64'), secrets);
  const batch = context.store.batch();
  const stored = await batch.put(body.bytes);
  const requestBody = await batch.put(sent.bytes);
  await batch.commit();
  const isDone = response.status < 400;
  await journal.append(
    isDone ? 'action-completed' : 'action-failed',
    {
      startedSeq: id,
      evidence: {
        status: response.status,
        headers,
        body: { ...stored, truncated: bodyTruncated },
        durationMs: Math.round(response.durationMs),
        address: response.address,
        requestBody,
      },
      ...((redacted.length > 0 || body.count > 0 || sent.count > 0) && {
        redacted: [
          ...redacted.map((name) => `response.headers.${name}`),
          ...(body.count > 0 ? ['response.body'] : []),
          ...(sent.count > 0 ? ['request.body'] : []),
        ],
      }),
      ...(!isDone && {
        error: { code: 'HTTP_STATUS', message: `The server answered ${response.status}.` },
      }),
    },
    [
      { type: 'blob', digest: stored.digest },
      { type: 'blob', digest: requestBody.digest },
    ],
  );
  return {
    id,
    kind: 'http',
    class: actionClass,
    state: isDone ? 'done' : 'failed',
    target: targetOf(redactor, spec),
    changes: [],
    warnings: [],
    response: {
      status: response.status,
      headers,
      body: body.bytes.toString('utf8'),
      bodyTruncated,
      ...(!isUtf8(body.bytes) && { bodyBase64: body.bytes.toString('base64') }),
    },
  };
}
