/**
 * The text a model sees, per operation the MCP server offers. The map is typed by the table: an
 * operation offered without a presenter here fails the typecheck.
 */
import {
  type ActionDetail,
  type ActionResult,
  asRewindError,
  type ExecResult,
  formatVerification,
  type SessionPolicies,
} from '../index.js';
import { type InputOf, type OperationsOn, type OutputOf, undoHintOf } from '../operations/index.js';

/** What a tool call answers. */
export type ToolResult = { content: { type: 'text'; text: string }[]; isError?: boolean };

type McpOperation = OperationsOn<'mcp'>;
type McpOperationNamed<Name> = Extract<McpOperation, { name: Name }>;

/** The answer to a call of `Name`, from what the operation returned and the input it ran with. */
type Presenter<Name extends McpOperation['name']> = (
  output: OutputOf<McpOperationNamed<Name>>,
  input: InputOf<McpOperationNamed<Name>>,
) => ToolResult;

/** How many log entries a model sees when it does not ask for a number. */
const LOG_LINES_SHOWN = 50;

const text = (value: string): ToolResult => ({ content: [{ type: 'text', text: value }] });

const refusal = (value: string): ToolResult => ({ ...text(value), isError: true });

/** Every answer that creates an action names it and how to take it back. */
function journaled(result: ActionResult, detail = ''): ToolResult {
  const hint = undoHintOf(result);
  const how =
    hint.way === 'approve-or-discard'
      ? `a draft: a person runs it with \`rewind approve ${hint.id}\`, or drops it with \`rewind discard ${hint.id}\``
      : hint.way === 'undo'
        ? `reversible: rewind undo ${hint.id}`
        : hint.way === 'compensate'
          ? `compensable: rewind compensate ${hint.id}`
          : hint.reason === 'discarded'
            ? 'discarded: it will never run'
            : 'irreversible';
  return text(`${detail}${detail ? '\n' : ''}journaled as action #${result.id} (${how})`);
}

/** How a command ended, for a model: `exit 0`, `ended by SIGTERM`, `timed out`. */
function endOf(ran: { timedOut: boolean; signal: string | null; exitCode: number | null }): string {
  return ran.timedOut
    ? 'timed out'
    : ran.signal
      ? `ended by ${ran.signal}`
      : `exit ${ran.exitCode}`;
}

/** Headers one per line, as `name: value`. */
const headerLines = (headers: Record<string, string>): string[] =>
  Object.entries(headers).map(([name, value]) => `${name}: ${value}`);

/** What an action stored, for a model: a command's output, a request and its response, else its entries. */
function showDetail(detail: ActionDetail): string {
  const lines = [
    `action #${detail.id} ${detail.kind} ${detail.target} (${detail.class}, ${detail.state}, ${detail.at})`,
  ];
  if (detail.command) {
    const ran = detail.command;
    lines.push(
      ran.stdout.text,
      ...(ran.stderr.text ? ['[stderr]', ran.stderr.text] : []),
      `${endOf(ran)} after ${Math.round(ran.durationMs)} ms` +
        (ran.stdout.truncated || ran.stderr.truncated ? ' (output stored cut at its limit)' : ''),
    );
  } else if (detail.request) {
    const request = detail.request;
    lines.push(
      `${request.method} ${request.url}`,
      ...headerLines(request.headers),
      ...(request.body ? ['', request.body.text] : []),
    );
    if (detail.response) {
      const response = detail.response;
      lines.push(
        '',
        `HTTP ${response.status}`,
        ...headerLines(response.headers),
        '',
        response.body.text,
      );
    } else {
      lines.push('(no response stored)');
    }
  } else {
    lines.push(JSON.stringify({ started: detail.started, closed: detail.closed ?? null }));
  }
  if (detail.redacted.length > 0)
    lines.push(`redacted before storing: ${detail.redacted.join(', ')}`);
  return lines.join('\n');
}

const PRESENTERS: { [Name in McpOperation['name']]: Presenter<Name> } = {
  write: (result) => journaled(result),
  delete: (result) => journaled(result),
  move: (result) => journaled(result),
  mkdir: (result) => journaled(result),
  read: (content, input) => text(content === '' ? `(${input.path} is empty)` : content),
  list: (entries) => text(entries.join('\n') || '(empty)'),
  exec: (result) => {
    // A draft did not run: it has no output to show.
    if (!('exitCode' in result)) return journaled(result);
    const ran = result as ExecResult;
    return journaled(
      ran,
      `${ran.stdout}${ran.stderr ? `\n[stderr]\n${ran.stderr}` : ''}\n${endOf(ran)}: ${ran.created.length} created, ${ran.modified.length} modified, ${ran.deleted.length} deleted`,
    );
  },
  http: (result) =>
    journaled(
      result,
      result.response ? `HTTP ${result.response.status}\n${result.response.body}` : '',
    ),
  show: (detail) => text(showDetail(detail)),
  record: (result) => journaled(result),
  report: (result) => journaled(result),
  checkpoint: (result) =>
    text(
      `checkpoint ${result.label} (#${result.seq}): ${result.fileCount} files; ${result.added} added, ${result.modified} modified, ${result.deleted} deleted since the previous one`,
    ),
  checkpoints: ({ checkpoints }) =>
    text(
      checkpoints
        .map(
          (checkpoint) =>
            `${checkpoint.label} (#${checkpoint.seq}, ${checkpoint.at}): +${checkpoint.added} ~${checkpoint.modified} -${checkpoint.deleted}` +
            (checkpoint.linesUncounted
              ? ' files, lines unknown'
              : checkpoint.linesAdded !== undefined
                ? ` files, +${checkpoint.linesAdded} -${checkpoint.linesRemoved ?? 0} lines`
                : '') +
            `${checkpoint.isAutomatic ? ' (automatic)' : ''}${checkpoint.conversation ? `, with ${checkpoint.conversation.messageCount} messages` : ''}`,
        )
        .join('\n') || 'no checkpoints yet',
    ),
  rollback: (result, input) => {
    const what = input.paths ? `${input.paths.join(', ')} ` : '';
    if (result.isDryRun) {
      const changes = result.changes.map((change) => `${change.action} ${change.path}`);
      const conversation = result.conversation
        ? `\nthe conversation would be restored to ${result.conversation.messages.length} messages`
        : '';
      return text(
        `rolling back ${what}to ${result.label} would change ${changes.length} paths${changes.length > 0 ? `:\n${changes.join('\n')}` : ''}${conversation}`,
      );
    }
    const conversation = result.conversation
      ? `\nrestored conversation:\n${JSON.stringify(result.conversation.messages)}`
      : '';
    return text(
      `rolled back ${what}to ${result.label}: ${result.applied?.written ?? 0} written, ${result.applied?.created ?? 0} created, ${result.applied?.deleted ?? 0} deleted; journaled as action #${result.id} (reversible: rewind undo ${result.id})${conversation}`,
    );
  },
  undo: (result) =>
    result.status === 'refused'
      ? refusal(
          `Refused to undo #${result.undoes}: later edits would be overwritten:\n${result.conflicts
            .map(
              (conflict) =>
                `${conflict.path}: expected ${conflict.expected}, found ${conflict.found}`,
            )
            .join('\n')}\nNothing changed. Revert those edits first, or roll back to a checkpoint.`,
        )
      : text(
          `undid #${result.undoes}; journaled as action #${result.id} (reversible: rewind undo ${result.id} redoes it)`,
        ),
  diff: (result) => text(result.text || `No differences between ${result.from} and ${result.to}.`),
  'conversation-sync': (result) =>
    text(
      result.isChanged
        ? `recorded ${result.messageCount} ${result.format} messages`
        : 'unchanged; nothing recorded',
    ),
  'conversation-show': (conversation) =>
    text(
      `${conversation.messages.length} ${conversation.format} messages:\n${JSON.stringify(conversation.messages)}`,
    ),
  test: (result) => text(`${result.status.toUpperCase()}: ${formatVerification(result)}`),
  status: (report) =>
    text(
      JSON.stringify(
        {
          ...report,
          sessions: report.sessions.map((session) => ({
            ...session,
            unsupported: session.unsupported?.message,
          })),
        },
        null,
        2,
      ),
    ),
  'session-list': (listed) =>
    text(
      listed.sessions
        .map(
          (session) =>
            `${session.id}${marksOf(session, listed.workingSession)}: started ${session.startedAt ?? 'unknown'}, ${session.entryCount} ${session.entryCount === 1 ? 'entry' : 'entries'}, ${session.isolation}` +
            (session.sandbox !== 'none'
              ? `, sandbox ${session.sandbox}${session.network ? ' with network' : ''}`
              : '') +
            (session.isHashChained ? ', hash-chained' : '') +
            (session.unsupported
              ? ` (written by a newer Rewind: ${session.unsupported.code})`
              : ''),
        )
        .join('\n') || 'no sessions',
    ),
  log: (report, input) => {
    if (report.entries.length === 0) {
      const filters = [
        input.kind !== undefined && `of kind ${JSON.stringify(input.kind)}`,
        input.checkpoint !== undefined && `about checkpoint ${JSON.stringify(input.checkpoint)}`,
      ].filter(Boolean);
      return text(
        `no entries${filters.length > 0 ? ` ${filters.join(' ')}` : ''} in session ${report.session.id}`,
      );
    }
    const lines = report.entries.map(
      (line) =>
        `#${line.seq} ${line.kind} ${line.summary}${line.action ? ` [${line.action.state}]` : ''}`,
    );
    if (input.last !== undefined || lines.length <= LOG_LINES_SHOWN) return text(lines.join('\n'));
    return text(
      `(the last ${LOG_LINES_SHOWN} of ${lines.length} entries; give last for more)\n${lines.slice(-LOG_LINES_SHOWN).join('\n')}`,
    );
  },
  note: (result) => text(`added note #${result.entry.seq} to session ${result.session}`),
  verify: (report) =>
    report.isOk
      ? text(
          `verified ${report.sessions.length} sessions and ${report.objectsChecked} objects: no problems`,
        )
      : text(
          [
            `${report.problems.length} problems:`,
            ...report.problems.map(
              (problem) =>
                `${problem.type}${problem.session ? ` (session ${problem.session}${problem.seq !== undefined ? ` #${problem.seq}` : ''})` : ''}: ${problem.message}`,
            ),
          ].join('\n'),
        ),
  commit: ({ diff, ...result }) => {
    const body = JSON.stringify(result, null, 2);
    if (result.status === 'refused') return refusal(body);
    // The diff as it reads, after the plan: conflicting paths are in `conflicts`, not in it.
    return text(
      diff === undefined
        ? body
        : `${body}\n${diff || '(an empty diff: the commit would write nothing, conflicts aside)'}`,
    );
  },
  'policy-show': (policies) => text(describePolicies(policies)),
  'policy-set': (policies) => text(describePolicies(policies)),
};

/** The policies in words: what happens before and after the calls that change something. */
function describePolicies(policies: SessionPolicies): string {
  const { autoCheckpoint: checkpoint, autoRollback: rollback } = policies;
  const verifier = rollback?.verifier?.command;
  return [
    checkpoint
      ? `autoCheckpoint: on, a checkpoint before each write, delete, move, mkdir, exec and http call${checkpoint.keepLast !== undefined ? `, keeping the newest ${checkpoint.keepLast}` : ''}`
      : 'autoCheckpoint: off',
    rollback
      ? `autoRollback: on ${rollback.on.join(' and ')}, to ${rollback.to === 'latest' ? 'the newest checkpoint not already broken' : `checkpoint ${rollback.to}`}, restoring ${rollback.scope === 'both' ? 'files and conversation' : `the ${rollback.scope}`}` +
        (verifier !== undefined
          ? `; verifier: ${typeof verifier === 'string' ? verifier : verifier.join(' ')}`
          : '')
      : 'autoRollback: off',
  ].join('\n');
}

/** What a model should do next, for the failures where it differs from what a person would do. */
const ADVICE_FOR_A_MODEL: Partial<Record<string, string>> = {
  SNAPSHOT_TOO_LARGE:
    'Do not raise maxSize yourself: leave build output and dependencies out of snapshots (add them to .gitignore or .rewindignore), or ask a person whether to store it all.',
};

/** A failure as the model should see it: what went wrong, its code, and what to do next. */
export function presentFailure(error: unknown): ToolResult {
  const known = asRewindError(error);
  if (!known) {
    return refusal(`Unexpected error: ${error instanceof Error ? error.message : String(error)}`);
  }
  const advice = ADVICE_FOR_A_MODEL[known.code];
  return refusal(`${known.message} [${known.code}]${advice ? `\n${advice}` : ''}`);
}

/**
 * The presenter of an operation the server offers. Throws for any other name: the map above is
 * typed to hold exactly those, so that is a mistake in the server's code.
 */
export function presenterOf(name: string): (output: unknown, input: unknown) => ToolResult {
  // The map is checked against the table above; a lookup by a plain name cannot carry its types.
  const presenters = PRESENTERS as unknown as Record<
    string,
    (output: unknown, input: unknown) => ToolResult
  >;
  const present = presenters[name];
  if (!present) throw new Error(`The MCP server has no presenter for ${name}.`);
  if (SHOWS_ITS_WARNINGS.has(name)) return present;
  return (output, input) => withWarnings(present(output, input), output);
}

/** The operations whose answer holds their warnings already (the whole result, as JSON). */
const SHOWS_ITS_WARNINGS = new Set(['commit', 'status']);

/**
 * `result` with the output's `warnings` (a path left out of a snapshot, a command run without a
 * sandbox, edits a rollback kept) after its text, one `warning: ...` line each: many clients give
 * a model only the text, not the structured content that holds them too.
 */
function withWarnings(result: ToolResult, output: unknown): ToolResult {
  const warnings = (output as { warnings?: unknown } | null | undefined)?.warnings;
  if (!Array.isArray(warnings) || warnings.length === 0) return result;
  const lines = warnings.map((warning) => `warning: ${String(warning)}`).join('\n');
  const last = result.content.at(-1);
  const content =
    last === undefined
      ? [{ type: 'text' as const, text: lines }]
      : [...result.content.slice(0, -1), { ...last, text: `${last.text}\n${lines}` }];
  return { ...result, content };
}

/**
 * How a listed session is marked: the one the server works in, and the store's current one (a
 * person's commands use it), which differ for an isolated server.
 */
function marksOf(session: { id: string; isCurrent: boolean }, working: string | undefined): string {
  const marks = [
    ...(session.id === working ? ["this server's session"] : []),
    ...(session.isCurrent ? ["the store's current session"] : []),
  ];
  return marks.length === 0 ? '' : ` (${marks.join(', ')})`;
}
