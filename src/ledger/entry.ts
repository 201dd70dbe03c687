import { RewindError } from '../errors.js';
import { canonicalJson, type Digest, digestBytes, isDigestCold } from '../lib/index.js';
import type { ObjectReference } from '../store/index.js';

/** The ledger entry format version this Rewind writes and reads. */
export const LEDGER_FORMAT_VERSION = 1;

/**
 * Every entry kind this Rewind knows, with what its body holds. SPEC.md has the same table.
 * Kinds are a noun plus a past-tense verb.
 */
export const ENTRY_KINDS = {
  'session-started':
    'A session began. Body: `hashChain` (boolean), `rewindVersion`, `workspace`, `host`, `pid`; `sandbox` and `network` when given at init; `isolation` (`isolated`) for an isolated session, and `startedBy` (`mcp`) when what started it said so; `redact` (`headers`: true to redact credentials, `patterns`) and `blockPrivate` (true) when the session was started with them: every process that opens the session applies them.',
  'settings-tightened':
    'A process opened the session with protections it did not have yet; from here on every process applies them too. Body: what was added: `redact` (`headers`: true, `patterns`), `blockPrivate` (true).',
  'note-added':
    'A person or program annotated the timeline. Body: `text`; `attachments` (`name`, `digest`, `sizeBytes`), each also a blob in `refs`.',
  'checkpoint-created':
    'The workspace was recorded under a label. Body: `label`, `tree`, `fileCount`, `sizeBytes`, `added`, `modified`, `deleted` (files changed since the previous checkpoint), `isAutomatic`, `conversation` (`tree`, `format`, `messageCount`) when the session has one, `rules` (the blob of the rules from outside the workspace the snapshot applied) when there were any, and `unreadable` (the paths it could not read and left out, which a rollback to it leaves as they are) when there were some.',
  'conversation-synced':
    'The conversation changed and was recorded. Body: `conversation` (`tree`: one file per message, `format`, `messageCount`).',
  'rollback-started':
    "Intent: the workspace is about to be restored to a checkpoint. Body: `label`, `checkpointSeq`, `beforeTree` (the workspace as it was, saved first), `afterTree` (the target: the workspace as it was for a rollback of the conversation only), `changeCount`, `scope` (`files` or `conversation`) when the rollback restores only those, `afterRules` (the checkpoint's `rules`) when it has some; when the checkpoint holds a conversation and the rollback restores it, `conversationBefore` (the current one, if any) and `conversationAfter` (the checkpoint's, repaired for its provider, with the resume note), each `tree`, `format`, `messageCount`.",
  'rollback-completed':
    "The restore announced by a rollback-started entry finished. Body: `startedSeq`, `written`, `created`, `deleted`, `skipped` (paths left alone because either side's rules leave them out, at most 100), `skippedCount`, `createdLeftOut` (paths created though the workspace's rules leave them out, at most 100) when there are some, `keptEdited` (paths edited while the rollback was under way, left as they are) when there are some, `isRecovery`; after a recovery that first saved paths edited since the crash, `savedAs` (the checkpoint holding them), `drifted` (up to 50), `driftedCount`.",
  'undo-started':
    'Intent: an action is about to be undone. Body: `undoes` (its seq), and either `beforeTree` and `afterTree` (every path that differs between them is set to its afterTree state) or `paths` (each `path` set from `before` to `after`, tree entries or null); `mayRemove` (the `createdLeftOut` of the undone restore, which the rules of afterTree do not protect); `unreadable` (those of the undone command, left as they are); `conversationBefore` and `conversationAfter` when the undone action moved the conversation.',
  'undo-completed':
    'The undo announced by an undo-started entry finished. Body: `startedSeq`, `undoes`, `written`, `created`, `deleted`, `skipped`, `skippedCount`, `createdLeftOut` and `keptEdited` when there are some, `isRecovery`.',
  'rollback-failed':
    'The restore announced by a rollback-started entry failed; the paths it touched were put back when `isReverted`. Body: `startedSeq`, `error` (`code`, `message`; NOT_APPLIED when recovery found it had changed no path, so closed it without performing it), `isReverted`, `isRecovery`.',
  'undo-failed':
    'The undo announced by an undo-started entry failed; the paths it touched were put back when `isReverted`. Body: `startedSeq`, `undoes`, `error` (`code`, `message`; NOT_APPLIED as for rollback-failed), `isReverted`, `isRecovery`.',
  'undo-refused':
    'An undo was refused because paths the action touched changed since. Body: `undoes`, `paths` (up to 50), `conflicts` (the same paths with `expected` and `found`), `pathCount`.',
  'action-started':
    'Intent, journaled before the effect: an action is about to run. Body: `action` (write, delete, move, mkdir, exec), `class` (reversible, compensable, irreversible), `target`; a file action has `paths` (each `path` with its `before` and `after` tree entries, already stored); exec has `command`, `beforeTree`, `timeoutMs`, `outsideWorkspace` ("unknown").',
  'action-completed':
    'The action announced by action-started succeeded. Body: `startedSeq`, `isRecovery`; a file action adds `written`, `created`, `deleted`, `skipped`; exec adds `afterTree`, `created`, `modified`, `deleted` (paths, up to 1,000 each), `counts`, `unreadable` (paths the command left unreadable, so missing from afterTree yet not deleted; an undo leaves them as they are) when there are some, `evidence` (`exitCode`, `signal`, `timedOut`, `durationMs`, `stdout` and `stderr` as `digest`, `sizeBytes`, `truncated`).',
  'verification-recorded':
    'A verifier ran and gave its verdict. Body: `status` (pass, fail, unknown), `summary`, `errors`, `notes` (why unknown), `command`, `attempts` (each `status`, `exitCode`), `evidence` (`stdout`, `stderr` as `{digest, sizeBytes}`, `sandbox`); `tree`, the files it judged, when the session had a checkpoint.',
  'checkpoint-pruned':
    "A checkpoint was dropped: by an automatic checkpoint policy's keepLast, or by prune. It is no longer listed, and no longer keeps its objects alive. Body: `label`, `checkpointSeq`; `reason` (`keep-last`, `older-than`, `max-size`) when prune dropped it.",
  'escalation-resolved':
    'A verification stayed unknown after its retries and was escalated. Body: `verificationSeq`, `resolution` (continue, rollback, stop), `checkpoint` (the rollback target), `handler`, `error` (when the handler failed: then stop).',
  'rollback-skipped':
    'An automatic rollback was not done: it would have changed nothing, or there was no checkpoint to go to (none, or every one holds files a verifier failed). Body: `label`, `event` (exception, test-failure, escalation), `reason`.',
  'view-created':
    'An isolated session made its private view of the workspace. Body: `view` (its path under the store), `baseTree` (what it holds: the host as copied), `fileCount`, `sizeBytes`, `hostTree` (a snapshot of the host taken as the view was recorded; absent before 2026-12), and `unreadable` (the host paths that snapshot could not read, left out of the view) when there were some.',
  'commit-refused':
    'A commit of an isolated session was refused: the host changed paths the session changed too. Body: `conflicts` (up to 50: `path`, `session`, `host`), `conflictCount`, `sessionTree`, `hostTree`.',
  'session-destroyed':
    'An isolated session removed its view; it is not used afterwards. Body: `pendingCount` (uncommitted files dropped), `leftOutCount` (when forced: paths the ignore rules leave out that changed in the view, dropped with it), `viewTree` (the view as it was, kept in the store).',
  'action-approved':
    'A draft was approved and is about to run. Body: `startedSeq` (the draft), `digest` (the content approved), and for exec `beforeTree`.',
  'action-discarded': 'A draft was discarded: it never runs. Body: `startedSeq`.',
  'action-failed':
    'The action announced by action-started failed. Body: `startedSeq`, `error` (`code`, `message`; INTERRUPTED when the process running it ended first; NOT_APPLIED when recovery found it had changed no path, so closed it without performing it; DRIFTED for a commit that recovery did not finish because the workspace changed since, with `drifted` and `driftedCount`), and for exec `afterTree` and the fields of action-completed; a file action adds `isReverted`.',
} as const;

/** A ledger entry kind that this Rewind knows. */
export type EntryKind = keyof typeof ENTRY_KINDS;

/** True when `kind` is in {@link ENTRY_KINDS}. */
export function isKnownEntryKind(kind: string): kind is EntryKind {
  return Object.hasOwn(ENTRY_KINDS, kind);
}

/** One line of a session's ledger. */
export interface LedgerEntry {
  /** Format version of this entry. */
  v: number;
  /** Position in the session, from 1, strictly increasing without gaps. */
  seq: number;
  /** When it was appended: ISO 8601 UTC with milliseconds. */
  at: string;
  kind: string;
  body: Record<string, unknown>;
  /** Objects this entry keeps alive: garbage collection and `rewind verify` follow them. */
  refs?: ObjectReference[];
  /** In a hash-chained session: the digest of the previous entry's canonical JSON. */
  prev?: Digest;
}

const TIMESTAMP_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * Checks that a parsed line has the shape of a ledger entry (any version). Returns why not, or
 * undefined when it does.
 */
export function checkEnvelope(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'it is not an object';
  const entry = value as Record<string, unknown>;
  if (!Number.isInteger(entry.v) || (entry.v as number) < 1) return 'its version "v" is missing';
  if (!Number.isSafeInteger(entry.seq) || (entry.seq as number) < 1)
    return 'its "seq" is not a positive integer';
  if (typeof entry.at !== 'string' || !TIMESTAMP_PATTERN.test(entry.at))
    return 'its "at" is not an ISO 8601 UTC time';
  if (typeof entry.kind !== 'string' || entry.kind === '') return 'its "kind" is missing';
  if (typeof entry.body !== 'object' || entry.body === null || Array.isArray(entry.body)) {
    return 'its "body" is not an object';
  }
  if (entry.prev !== undefined && !isDigestCold(entry.prev)) return 'its "prev" is not a digest';
  if (entry.refs !== undefined) {
    if (!Array.isArray(entry.refs)) return 'its "refs" is not a list';
    for (const reference of entry.refs as unknown[]) {
      const ref = reference as Record<string, unknown> | null;
      if (!ref || (ref.type !== 'blob' && ref.type !== 'tree') || !isDigestCold(ref.digest)) {
        return 'its "refs" holds an invalid reference';
      }
    }
  }
  return undefined;
}

/** The canonical JSON of an entry: the exact text of its ledger line, and what the chain hashes. */
export function encodeEntry(entry: LedgerEntry): string {
  return canonicalJson(entry);
}

/**
 * The entry that follows `last` in a session: the next `seq`, and in a hash-chained session
 * `prev`, the digest of `last`. Throws `LEDGER_CORRUPT` when `last` cannot be followed (a `seq`
 * too large, content the chain cannot hash): `where` names the ledger (`of /path/x.jsonl`),
 * `repair` what to do, and `data` goes with the error.
 */
export function entryAfter(
  last: LedgerEntry | undefined,
  next: Pick<LedgerEntry, 'kind' | 'body' | 'at'> & { refs?: readonly ObjectReference[] },
  isHashChained: boolean,
  damage: { where: string; repair: string; data: Record<string, unknown> },
): LedgerEntry {
  const refuse = (what: string) =>
    new RewindError(
      'LEDGER_CORRUPT',
      `The last entry ${damage.where} ${what}, so it was damaged. Nothing was written. Run \`rewind verify\`, and ${damage.repair}.`,
      { data: { ...damage.data, seq: last?.seq } },
    );
  const seq = (last?.seq ?? 0) + 1;
  // No session reaches 2^53 entries: a last seq that high was damaged, and the next one would
  // be a line no reader takes as an entry (the append would be lost).
  if (!Number.isSafeInteger(seq)) throw refuse(`has seq ${last?.seq}, too large to follow`);
  const entry: LedgerEntry = {
    v: LEDGER_FORMAT_VERSION,
    seq,
    at: next.at,
    kind: next.kind,
    body: next.body,
  };
  if (next.refs && next.refs.length > 0) {
    entry.refs = next.refs.map(({ type, digest }) => ({ type, digest }));
  }
  if (isHashChained && last) {
    const prev = digestEntry(last);
    if (prev === undefined) {
      throw refuse(
        `(#${last.seq}) cannot be hashed for the chain: it holds a number or a nesting that canonical JSON cannot encode`,
      );
    }
    entry.prev = prev;
  }
  return entry;
}

/** Throws `INVALID_ARGUMENT` unless `kind` is an entry kind this version writes (§8). */
export function checkEntryKind(kind: string): void {
  if (isKnownEntryKind(kind)) return;
  throw new RewindError(
    'INVALID_ARGUMENT',
    `"${kind}" is not a ledger entry kind. See SPEC.md for the kinds.`,
    { data: { kind } },
  );
}

/**
 * The line a new entry is written as ({@link encodeEntry}). Throws `INVALID_ARGUMENT` for a body
 * that canonical JSON cannot hold (a number beyond a double's range, a cycle).
 */
export function encodeNewEntry(entry: LedgerEntry): string {
  try {
    return encodeEntry(entry);
  } catch (error) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `The body of a ${entry.kind} entry cannot be stored as JSON: ${String(error)}`,
      { data: { kind: entry.kind }, cause: error },
    );
  }
}

/**
 * The digest the next entry of a hash-chained session carries as `prev`. Undefined for an entry
 * read from a damaged line whose content has no canonical JSON (a number beyond a double's range,
 * nesting deeper than the encoder goes): Rewind never writes one, so no `prev` can match it.
 */
export function digestEntry(entry: LedgerEntry): Digest | undefined {
  try {
    return digestBytes(encodeEntry(entry));
  } catch {
    return undefined;
  }
}

/**
 * A body field as `rewind log` words it. A damaged or hand-edited line may hold anything there,
 * and `String()` throws on some objects (`{"toString": 1}`), so objects are named, not converted.
 */
function shown(value: unknown): string {
  if (typeof value !== 'object' || value === null) return String(value);
  return Array.isArray(value) ? '(a list)' : '(an object)';
}

/** `1 file`, `2 files` (any value shown as it is, with the plural). */
const counted = (value: unknown, noun: string): string =>
  `${shown(value)} ${value === 1 ? noun : `${noun}s`}`;

/** A one-line, human summary of an entry, as `rewind log` prints it. */
export function describeEntry(entry: LedgerEntry): string {
  const body = entry.body;
  if (entry.v > LEDGER_FORMAT_VERSION || !isKnownEntryKind(entry.kind)) {
    return `(written by a newer Rewind: format ${entry.v}, kind ${entry.kind})`;
  }
  switch (entry.kind) {
    case 'session-started': {
      const chain = body.hashChain === true ? ', hash-chained' : '';
      const version =
        typeof body.rewindVersion === 'string' ? ` by rewind ${body.rewindVersion}` : '';
      const where = typeof body.workspace === 'string' ? ` in ${body.workspace}` : '';
      return `session started${where}${version}${chain}`;
    }
    case 'settings-tightened': {
      const redact = (body.redact ?? {}) as { headers?: unknown; patterns?: unknown };
      const added = [
        ...(redact.headers === true ? ['redaction of credentials'] : []),
        ...(Array.isArray(redact.patterns)
          ? redact.patterns.map((pattern) => `redaction of /${String(pattern)}/`)
          : []),
        ...(body.blockPrivate === true ? ['refusal of private addresses'] : []),
      ];
      return `session protections added: ${added.join(', ')}`;
    }
    case 'note-added': {
      const attachments = Array.isArray(body.attachments) ? body.attachments.length : 0;
      const suffix =
        attachments > 0 ? ` (${attachments} attachment${attachments === 1 ? '' : 's'})` : '';
      return `note: ${shown(body.text)}${suffix}`;
    }
    case 'checkpoint-created': {
      const conversation = body.conversation as { messageCount?: number } | undefined;
      const messages = conversation ? ` and ${shown(conversation.messageCount)} messages` : '';
      return `checkpoint ${shown(body.label)}: ${counted(body.fileCount, 'file')}${messages}, ${shown(body.added)} added, ${shown(body.modified)} modified, ${shown(body.deleted)} deleted since the previous one`;
    }
    case 'conversation-synced': {
      const conversation = (body.conversation ?? {}) as { messageCount?: number; format?: string };
      return `conversation recorded: ${shown(conversation.messageCount)} ${shown(conversation.format)} messages`;
    }
    case 'rollback-started':
      return `rollback to ${shown(body.label)} started: ${counted(body.changeCount, 'path')} to restore (undo with \`rewind undo ${entry.seq}\`)`;
    case 'rollback-completed':
    case 'undo-completed': {
      const what =
        entry.kind === 'rollback-completed'
          ? `rollback #${shown(body.startedSeq)}`
          : `undo #${shown(body.startedSeq)} (of #${shown(body.undoes)})`;
      const recovery = body.isRecovery === true ? ', finished after an interruption' : '';
      return `${what} completed: ${shown(body.written)} written, ${shown(body.created)} created, ${shown(body.deleted)} deleted${recovery}`;
    }
    case 'rollback-failed':
    case 'undo-failed': {
      const what = entry.kind === 'rollback-failed' ? 'rollback' : 'undo';
      const error = (body.error ?? {}) as { code?: unknown; message?: unknown };
      const state =
        body.isReverted === true
          ? 'workspace put back as it was'
          : 'workspace left partly restored';
      return `${what} #${shown(body.startedSeq)} failed (${shown(error.code)}): ${state}`;
    }
    case 'undo-started':
      return `undo of #${shown(body.undoes)} started (redo with \`rewind undo ${entry.seq}\`)`;
    case 'undo-refused':
      return `undo of #${shown(body.undoes)} refused: ${shown(body.pathCount)} ${body.pathCount === 1 ? 'path it touched has' : 'paths it touched have'} changed since`;
    case 'action-started': {
      const draft = body.draft === true ? ' drafted' : '';
      const compensates =
        typeof body.compensates === 'number' ? `, compensating #${body.compensates}` : '';
      return `${shown(body.action)} ${shown(body.target)}${draft} (${shown(body.class)}${compensates})`;
    }
    case 'action-completed': {
      const counts = body.counts as
        | { created?: number; modified?: number; deleted?: number }
        | undefined;
      const evidence = body.evidence as { exitCode?: unknown } | undefined;
      const detail = counts
        ? `: exit ${shown(evidence?.exitCode)}, ${shown(counts.created)} created, ${shown(counts.modified)} modified, ${shown(counts.deleted)} deleted`
        : '';
      const recovery = body.isRecovery === true ? ', finished after an interruption' : '';
      return `#${shown(body.startedSeq)} done${detail}${recovery}`;
    }
    case 'verification-recorded': {
      const summary = typeof body.summary === 'string' ? `: ${body.summary}` : '';
      const attempts =
        Array.isArray(body.attempts) && body.attempts.length > 1
          ? ` after ${body.attempts.length} attempts`
          : '';
      return `verification ${shown(body.status)}${attempts}${summary}`;
    }
    case 'checkpoint-pruned': {
      const reasons: Record<string, string> = {
        'keep-last': 'beyond the last kept',
        'older-than': 'older than the age kept',
        'max-size': 'beyond the size kept',
      };
      if (typeof body.reason !== 'string') {
        return `automatic checkpoint ${shown(body.label)} pruned (keepLast)`;
      }
      // Looked up as an own key: a damaged reason such as "constructor" is shown as it is.
      const reason = Object.hasOwn(reasons, body.reason) ? reasons[body.reason] : body.reason;
      return `checkpoint ${shown(body.label)} pruned (${reason})`;
    }
    case 'escalation-resolved':
      return `unknown verdict escalated: ${shown(body.resolution)}${body.checkpoint ? ` (checkpoint ${shown(body.checkpoint)})` : ''}`;
    case 'rollback-skipped':
      return `rollback to ${shown(body.label)} skipped: ${shown(body.reason)}`;
    case 'view-created':
      return `isolated view created: ${counted(body.fileCount, 'file')} copied from the host`;
    case 'commit-refused':
      return `commit refused: ${shown(body.conflictCount)} conflicting ${body.conflictCount === 1 ? 'path' : 'paths'} (changed on the host too)`;
    case 'session-destroyed':
      return `session destroyed (${shown(body.pendingCount)} uncommitted changes dropped)`;
    case 'action-approved':
      return `draft #${shown(body.startedSeq)} approved (${shown(body.digest).slice(0, 19)})`;
    case 'action-discarded':
      return `draft #${shown(body.startedSeq)} discarded`;
    case 'action-failed': {
      const error = (body.error ?? {}) as { code?: unknown; message?: unknown };
      return `#${shown(body.startedSeq)} failed (${shown(error.code)}): ${shown(error.message)}`;
    }
  }
}
