/**
 * Input pieces several operations share, each with its message written once. Messages for one key
 * are predicates (`must be ...`); messages for a rule across keys name the keys in backticks, which
 * each edge spells its own way (`--compensate-command` on the command line).
 */
import * as z from 'zod';
import type { Compensation } from '../index.js';

/** A path relative to the workspace root (the library refuses one that escapes it). */
export const workspacePath = () =>
  z.string().describe('A path relative to the workspace root, such as "src/index.ts".');

/** The longest duration a timer waits (2^31 - 1 ms, about 24.8 days), in whole seconds. */
const MAX_SECONDS = 2_147_483;

const SECONDS = 'must be a positive number of seconds';

/** A duration in seconds, such as 0.5 or 120: at most what a timer can wait. */
export const seconds = () =>
  z.number({ error: SECONDS }).positive({ error: SECONDS }).max(MAX_SECONDS, {
    error: 'must be at most 2,147,483 seconds (24 days)',
  });

const ACTION_ID = 'must be an action id: the number the log shows';

/** An action id, as every action's answer and the log show it. */
export const actionId = () =>
  z
    .number({ error: ACTION_ID })
    .int({ error: ACTION_ID })
    .positive({ error: ACTION_ID })
    .describe('The action id, as the answer that journaled it and the log show it.');

/**
 * The message of a union of shapes (zod's own is only "Invalid input"): `expected`, unless the
 * value is of one of the shapes and only something inside it is wrong, which is said then, with
 * where (`keepLast: must be a whole number of 1 or more`).
 */
export function unionError(expected: string) {
  return (issue: { code?: string; errors?: unknown }): string => {
    const branches = (issue.code === 'invalid_union' ? issue.errors : undefined) as
      | { path: PropertyKey[]; message: string }[][]
      | undefined;
    const inside = branches?.find((branch) => (branch[0]?.path.length ?? 0) > 0)?.[0];
    return inside ? `${inside.path.map(String).join('.')}: ${inside.message}` : expected;
  };
}

/** Whether `text` is base64 (or base64url), as Buffer.from reads it without dropping anything: whitespace aside, only its alphabet, padded with `=` at the end if at all. */
export function isBase64(text: string): boolean {
  const compact = text.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(compact)) return false;
  return compact.includes('=') ? compact.length % 4 === 0 : compact.length % 4 !== 1;
}

/** A whole number of `minimum` or more. */
export function wholeNumber(minimum: number): z.ZodNumber {
  const message = `must be a whole number of ${minimum} or more`;
  return z.number({ error: message }).int({ error: message }).min(minimum, { error: message });
}

/** How an external action or a request is offset, declared up front: `compensable` then. */
export const compensationInputs = () => ({
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
});

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

const DURATION_UNITS_MS: Record<string, number> = {
  s: 1000,
  m: 60 * 1000,
  h: 60 * 60 * 1000,
  d: 24 * 60 * 60 * 1000,
  w: 7 * 24 * 60 * 60 * 1000,
};

/**
 * A duration written for people, in milliseconds: a number and a unit, `s`, `m` (minutes), `h`,
 * `d` or `w`, such as `30m`, `12h`, `7d`, `2w` or `1.5d`. Undefined when the text is not one.
 */
export function parseDuration(text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$/.exec(text);
  if (!match) return undefined;
  return Math.round(Number(match[1]) * (DURATION_UNITS_MS[match[2] as string] as number));
}

const SIZE_UNITS_BYTES: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kib: 1024,
  kb: 1000,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  mb: 1000 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  gb: 1000 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
  tb: 1000 ** 4,
};

/**
 * A size written for people, in bytes: a number alone (bytes), or with a unit: `KB`, `MB`, `GB`,
 * `TB` in powers of 1000; `KiB`, `MiB`, `GiB`, `TiB`, and `K`, `M`, `G`, `T` as git and `du`
 * write them, in powers of 1024 (any case). Such as `500MB`, `2GiB`, `1.5G`. Undefined when the
 * text is not one.
 */
export function parseSize(text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = SIZE_UNITS_BYTES[(match?.[2] ?? '').toLowerCase()];
  if (!match || unit === undefined) return undefined;
  return Math.round(Number(match[1]) * unit);
}

const DURATION = 'must be a duration such as 30m, 12h, 7d or 2w (s, m, h, d, w)';

/** A duration as {@link parseDuration} reads it. */
export const durationText = () =>
  z
    .string({ error: DURATION })
    .refine((text) => parseDuration(text) !== undefined, { error: DURATION });

const SIZE = 'must be a size such as 500MB, 2GiB or 1.5G, or a number of bytes';

/** A size as {@link parseSize} reads it. */
export const sizeText = () =>
  z.string({ error: SIZE }).refine((text) => parseSize(text) !== undefined, { error: SIZE });
