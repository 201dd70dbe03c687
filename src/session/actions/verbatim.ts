import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  canonicalJson,
  digestBytes,
  type JsonValue,
  readPlainFile,
  writeFileAtomic,
} from '../../lib/index.js';
import type { SessionContext } from '../context.js';
import type { ActionSpec } from './journaled-spec.js';

/**
 * Drafts and declared compensations are kept verbatim under `.rewind/drafts/` (the journaled
 * form may be redacted) so they run exactly as declared; the entry names them by digest. They
 * are deleted once they ran or were discarded, since they may hold secrets.
 */
function verbatimFile(context: SessionContext, digest: string): string {
  return join(context.storeDirectory, 'drafts', `${digest.slice(7)}.json`);
}

/** Keeps `value` verbatim; returns the digest that names it. */
export async function keepVerbatim(context: SessionContext, value: unknown): Promise<string> {
  const text = canonicalJson(value as JsonValue);
  const digest = digestBytes(text);
  await mkdir(join(context.storeDirectory, 'drafts'), { recursive: true });
  await writeFileAtomic(verbatimFile(context, digest), text);
  return digest;
}

/**
 * What was kept under `digest`: `missing` when the file is gone, `changed` when its content no
 * longer has that digest.
 */
export async function readVerbatim(
  context: SessionContext,
  digest: string,
): Promise<
  { status: 'ok'; value: unknown } | { status: 'missing'; error: unknown } | { status: 'changed' }
> {
  let text: string;
  try {
    // Never through a link or a pipe: what is not a plain file there keeps nothing.
    const read = await readPlainFile(verbatimFile(context, digest));
    if (!read.isFile) return { status: 'changed' };
    text = read.value.toString('utf8');
  } catch (error) {
    return { status: 'missing', error };
  }
  if (digestBytes(text) !== digest) return { status: 'changed' };
  return { status: 'ok', value: JSON.parse(text) };
}

/** Deletes what was kept under `digest`. */
export async function forgetVerbatim(context: SessionContext, digest: string): Promise<void> {
  await rm(verbatimFile(context, digest), { force: true });
}

/** Keeps a spec's declared compensation verbatim; the fields its entry adds to name it. */
export async function keepCompensation(
  context: SessionContext,
  spec: ActionSpec,
): Promise<{ compensationDigest?: string }> {
  if (spec.action === 'exec' || !spec.compensation) return {};
  return { compensationDigest: await keepVerbatim(context, spec.compensation) };
}
