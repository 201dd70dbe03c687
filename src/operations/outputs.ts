/**
 * What the operations an agent calls give back as data: per operation offered over MCP, a JSON
 * object made from its result (the MCP tool's structured content, beside the text a model reads)
 * and the schema it fits (the tool's output schema). Schemas name the fields a client can rely on
 * and let others through, so that a field added to an operation's result never turns a call that
 * did its work into a validation error. The map is typed by the table: an operation offered
 * without an entry fails the typecheck.
 */
import * as z from 'zod';
import type { ActionResult, SessionPolicies, SessionSummary } from '../index.js';
import type { InputOf, OutputOf } from './define-operation.js';
import type { OperationsOn } from './index.js';
import { undoHintOf } from './undo-hint.js';

type McpOperation = OperationsOn<'mcp'>;
type McpOperationNamed<Name> = Extract<McpOperation, { name: Name }>;

/** A tool's output schema, and how its structured content is made from the operation's result. */
interface Structured<Name extends McpOperation['name']> {
  schema: z.ZodObject;
  of(
    output: OutputOf<McpOperationNamed<Name>>,
    input: InputOf<McpOperationNamed<Name>>,
  ): Record<string, unknown>;
}

/** How many log entries the structured content holds when the call does not ask for a number. */
const LOG_ENTRIES_GIVEN = 50;

const count = z.number().int().nonnegative();

/**
 * An object with these fields, and maybe others (a client must let unknown fields through). Its
 * type names only the fields, so that {@link Mismatched} checks what each tool gives against them.
 */
const open = <Shape extends z.ZodRawShape>(shape: Shape): z.ZodObject<Shape> =>
  z.looseObject(shape) as unknown as z.ZodObject<Shape>;

/** How an action is taken back: `undo` with its id, `compensate`, approve or discard a draft, or not at all. */
const undoHint = open({
  way: z.enum(['undo', 'compensate', 'approve-or-discard', 'nothing']),
  id: z.number().int().optional(),
  reason: z.enum(['discarded', 'irreversible']).optional(),
});

const action = {
  id: z.number().int(),
  kind: z.string(),
  class: z.enum(['reversible', 'compensable', 'irreversible']),
  state: z.string(),
  target: z.string(),
  changes: z.array(open({ path: z.string() })),
  warnings: z.array(z.string()),
  undo: undoHint,
};
const actionSchema = open(action);

/** An action's result, with how to take it back. */
const journaled = (result: ActionResult) => ({ ...result, undo: undoHintOf(result) });

const session = open({
  id: z.string(),
  isCurrent: z.boolean(),
  isolation: z.enum(['shared', 'isolated']),
  isHashChained: z.boolean(),
  entryCount: count,
});

/** A session summary as JSON: the error of a session a newer Rewind wrote to, as its code and message. */
const summaryOf = ({ unsupported, ...rest }: SessionSummary) => ({
  ...rest,
  ...(unsupported && { unsupported: { code: unsupported.code, message: unsupported.message } }),
});

const checkpoint = {
  label: z.string(),
  seq: z.number().int(),
  at: z.string(),
  tree: z.string(),
  fileCount: count,
  sizeBytes: count,
  added: count,
  modified: count,
  deleted: count,
  isAutomatic: z.boolean(),
};

const conversation = { format: z.string(), messages: z.array(z.unknown()) };

/** The policies on now; null for one that is off. */
function policiesSchema() {
  return open({
    autoCheckpoint: open({ trigger: z.string(), keepLast: count.optional() }).nullable(),
    autoRollback: open({
      on: z.array(z.enum(['exception', 'test-failure'])),
      to: z.string(),
      scope: z.enum(['both', 'files', 'conversation']),
      verifier: z.unknown().optional(),
    }).nullable(),
  });
}

const policiesOf = (policies: SessionPolicies) => ({
  autoCheckpoint: policies.autoCheckpoint ?? null,
  autoRollback: policies.autoRollback ?? null,
});

const STRUCTURED = {
  write: { schema: actionSchema, of: journaled },
  delete: { schema: actionSchema, of: journaled },
  move: { schema: actionSchema, of: journaled },
  mkdir: { schema: actionSchema, of: journaled },
  record: { schema: actionSchema, of: journaled },
  report: { schema: actionSchema, of: journaled },
  read: {
    schema: open({ path: z.string(), content: z.string() }),
    of: (content, input) => ({ path: input.path, content }),
  },
  list: {
    schema: open({ path: z.string(), entries: z.array(z.string()) }),
    of: (entries, input) => ({ path: input.path ?? '.', entries }),
  },
  exec: {
    // A draft did not run: it has no exit, output or changes.
    schema: open({
      ...action,
      exitCode: z.number().int().nullable().optional(),
      signal: z.string().nullable().optional(),
      timedOut: z.boolean().optional(),
      durationMs: z.number().optional(),
      stdout: z.string().optional(),
      stderr: z.string().optional(),
      created: z.array(z.string()).optional(),
      modified: z.array(z.string()).optional(),
      deleted: z.array(z.string()).optional(),
      unreadable: z.array(z.string()).optional(),
    }),
    of: journaled,
  },
  http: {
    schema: open({
      ...action,
      response: open({
        status: z.number().int(),
        headers: z.record(z.string(), z.string()),
      }).optional(),
    }),
    of: journaled,
  },
  show: {
    schema: open({
      id: z.number().int(),
      kind: z.string(),
      class: z.string(),
      state: z.string(),
      target: z.string(),
      at: z.string(),
    }),
    of: (detail) => ({ ...detail }),
  },
  checkpoint: {
    schema: open({ ...checkpoint, readCount: count, warnings: z.array(z.string()) }),
    of: (result) => ({ ...result }),
  },
  checkpoints: {
    schema: open({
      checkpoints: z.array(
        open({
          ...checkpoint,
          linesAdded: count.optional(),
          linesRemoved: count.optional(),
          // With lines: true, a checkpoint whose lines could not be counted (a warning says so).
          linesUncounted: open({ code: z.string(), message: z.string() }).optional(),
        }),
      ),
      warnings: z.array(z.string()),
    }),
    of: (listed) => ({ ...listed }),
  },
  rollback: {
    schema: open({
      isDryRun: z.boolean(),
      label: z.string(),
      id: z.number().int().optional(),
      beforeTree: z.string(),
      afterTree: z.string(),
      changes: z.array(
        open({
          path: z.string(),
          action: z.enum(['written', 'created', 'deleted']),
          isUnrecorded: z.boolean(),
        }),
      ),
      // Files and links, as `changes` lists them; the directories made and removed apart.
      applied: open({
        written: count,
        created: count,
        deleted: count,
        directoriesCreated: count,
        directoriesDeleted: count,
        skipped: z.array(z.string()),
        skippedCount: count,
        // Paths edited while the rollback was under way, left as they are.
        keptEdited: z.array(z.string()).optional(),
      }).optional(),
      conversation: open({ ...conversation, note: z.string() }).optional(),
      warnings: z.array(z.string()),
    }),
    of: (result) => ({ ...result }),
  },
  undo: {
    schema: open({
      status: z.enum(['undone', 'refused']),
      undoes: z.number().int(),
      id: z.number().int().optional(),
      conflicts: z
        .array(open({ path: z.string(), expected: z.string(), found: z.string() }))
        .optional(),
      warnings: z.array(z.string()).optional(),
    }),
    of: (result) => ({ ...result }),
  },
  diff: {
    schema: open({
      from: z.string(),
      to: z.string(),
      changes: z.array(open({ path: z.string(), kind: z.enum(['added', 'deleted', 'modified']) })),
      text: z.string(),
      unreadable: z.array(z.string()).optional(),
    }),
    of: (result) => ({ ...result }),
  },
  'conversation-sync': {
    schema: open({
      tree: z.string(),
      format: z.string(),
      messageCount: count,
      isChanged: z.boolean(),
    }),
    of: (result) => ({ ...result }),
  },
  'conversation-show': {
    schema: open(conversation),
    of: (result) => ({ ...result }),
  },
  test: {
    schema: open({
      id: z.number().int(),
      status: z.enum(['pass', 'fail', 'unknown']),
      summary: z.string().optional(),
      errors: z.array(z.string()),
      notes: z.string().optional(),
    }),
    of: (result) => ({ ...result }),
  },
  status: {
    schema: open({
      workspace: z.string(),
      workingSession: z.string().optional(),
      sessions: z.array(session),
    }),
    of: (report) => ({ ...report, sessions: report.sessions.map(summaryOf) }),
  },
  'session-list': {
    schema: open({ workingSession: z.string().optional(), sessions: z.array(session) }),
    of: (listed) => ({ ...listed, sessions: listed.sessions.map(summaryOf) }),
  },
  log: {
    schema: open({
      session: session,
      entries: z.array(
        open({
          seq: z.number().int(),
          at: z.string(),
          kind: z.string(),
          summary: z.string(),
        }),
      ),
      entryCount: count,
    }),
    of: (report, input) => ({
      session: summaryOf(report.session),
      // As the text does: the last entries, not a whole ledger, unless the call asks.
      entries: report.entries
        .slice(-(input.last ?? LOG_ENTRIES_GIVEN))
        .map(({ entry: _entry, ...line }) => line),
      entryCount: report.entries.length,
    }),
  },
  note: {
    schema: open({
      id: z.number().int(),
      session: z.string(),
      entry: open({ seq: z.number().int(), kind: z.string() }),
    }),
    of: (result) => ({ id: result.entry.seq, ...result }),
  },
  verify: {
    schema: open({
      isOk: z.boolean(),
      objectsChecked: count,
      problems: z.array(open({ type: z.string(), message: z.string() })),
      warnings: z.array(z.string()),
    }),
    of: (report) => ({ ...report }),
  },
  'policy-show': { schema: policiesSchema(), of: policiesOf },
  'policy-set': { schema: policiesSchema(), of: policiesOf },
  commit: {
    schema: open({
      status: z.enum(['committed', 'refused', 'nothing-to-commit', 'dry-run']),
      id: z.number().int().optional(),
      changes: z.array(open({ path: z.string(), action: z.string() })),
      conflicts: z.array(open({ path: z.string() })),
      leftOut: z.array(z.string()),
      // With dryRun and diff: the unified diff of what the commit would write.
      diff: z.string().optional(),
    }),
    of: (result) => ({ ...result }),
  },
} satisfies { [Name in McpOperation['name']]: Structured<Name> };

/**
 * The operations whose structured content does not fit the schema the server advertises: none,
 * or the typecheck fails here, naming them (a mismatch would turn a call that did its work into a
 * validation error).
 */
type Mismatched = {
  [Name in keyof typeof STRUCTURED]: ReturnType<(typeof STRUCTURED)[Name]['of']> extends z.input<
    (typeof STRUCTURED)[Name]['schema']
  >
    ? never
    : Name;
}[keyof typeof STRUCTURED];
const everyStructuredFits: [Mismatched] extends [never] ? true : Mismatched = true;
void everyStructuredFits;

/** JSON as a client gets it: undefined fields dropped, an error as its code and message. */
function asJson(value: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(
    JSON.stringify(value, (_key, member: unknown) =>
      member instanceof Error
        ? { code: (member as { code?: unknown }).code, message: member.message }
        : member,
    ),
  ) as Record<string, unknown>;
}

/**
 * The output schema of an operation offered over MCP, and the JSON object its result gives.
 * Throws for any other name: the map above is typed to hold exactly those.
 */
export function structuredOutputOf(name: string): {
  schema: z.ZodObject;
  of: (output: unknown, input: unknown) => Record<string, unknown>;
} {
  const entry = (
    STRUCTURED as unknown as Record<
      string,
      { schema: z.ZodObject; of: (output: unknown, input: unknown) => Record<string, unknown> }
    >
  )[name];
  if (!entry) throw new Error(`The operation ${name} has no structured output.`);
  return { schema: entry.schema, of: (output, input) => asJson(entry.of(output, input)) };
}
