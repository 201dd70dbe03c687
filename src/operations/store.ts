/** The store as a whole: creating it, its state at a glance, the timeline, notes, checks, cleanup. */
import * as z from 'zod';
import {
  type AttachResult,
  attachShared,
  type CopyResult,
  createSandbox,
  findSharedSessions,
  gc,
  type InitResult,
  init,
  type LogReport,
  log,
  note,
  openSession,
  type Protections,
  previewWorkspace,
  pullSession,
  pushSession,
  type SessionStatus,
  type SessionSummary,
  type SharedSessionInfo,
  type SnapshotPreview,
  type StatusReport,
  startIsolatedSession,
  startSession,
  status,
  useSession,
  verify,
} from '../index.js';
import { defineOperation } from './define-operation.js';
import { wholeNumber } from './inputs.js';

/** The options of `init` that shape the session it starts. */
export type SessionOption = 'hashChain' | 'sandbox' | 'network';

/**
 * What {@link initOperation} did: `init`'s result, the isolated session it started, the options
 * given that the current session does not have (they apply only to a session being started, so
 * on a store that has one they are ignored, unless `isolated` starts a session that takes them), what the workspace's first
 * checkpoint would take (`preview.isFirst` tells whether it is still to come), and warnings.
 */
export type InitOutput = InitResult & {
  isolatedSession?: string;
  ignoredOptions: SessionOption[];
  preview: SnapshotPreview;
  warnings: string[];
};

const sessionInputs = () => ({
  hashChain: z
    .boolean()
    .optional()
    .describe('Make every ledger entry of the new session commit to the previous one.'),
  sandbox: z
    .enum(['bwrap', 'none', 'auto'])
    .optional()
    .describe('Where the session runs commands (default: none).'),
  network: z.boolean().optional().describe('Let sandboxed commands use the network.'),
});

/**
 * Checks a sandbox as a session starts with it, so one that cannot start is said at once, not at
 * the first exec: throws `SANDBOX_UNAVAILABLE` for bwrap, warns for auto falling back to none.
 * It is checked on the workspace itself: run as root, commands run as its owner (a workspace
 * owned by root is refused).
 */
function checkSandbox(sandbox: 'bwrap' | 'none' | 'auto' | undefined, workspace: string): string[] {
  return sandbox !== undefined && sandbox !== 'none'
    ? createSandbox({ backend: sandbox, workspace }).warnings
    : [];
}

/** The protections `from` has and `to` lacks, in words: `redaction of credentials`. */
function missingProtections(from: Protections, to: Protections): string[] {
  return [
    ...(from.redact.headers && !to.redact.headers ? ['redaction of credentials'] : []),
    ...from.redact.patterns
      .filter((pattern) => !to.redact.patterns.includes(pattern))
      .map((pattern) => `redaction of /${pattern}/`),
    ...(from.blockPrivate && !to.blockPrivate ? ['refusal of private addresses'] : []),
  ];
}

/**
 * The warning for a new session that lacks protections the current one has: a session records
 * only what it is started with, so starting one is how a person works without them, and it is
 * said, never silent.
 */
function looserWarnings(
  previous: SessionSummary | undefined,
  started: SessionSummary | undefined,
): string[] {
  if (!previous || !started || previous.id === started.id) return [];
  const missing = missingProtections(previous.protections, started.protections);
  if (missing.length === 0) return [];
  return [
    `The new session ${started.id} does not have the ${namedList(missing)} of session ${previous.id}: a session keeps only the protections it was started or opened with. Give the same options to keep them.`,
  ];
}

/** `a`, `a and b`, `a, b and c`. */
function namedList(items: readonly string[]): string {
  return items.length <= 1
    ? (items[0] ?? '')
    : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

/** The summary of session `id` of the store at `workspace`. */
/** The current session of the store in `workspace`, if it has a store and a current session. */
async function currentSessionOf(workspace: string): Promise<SessionSummary | undefined> {
  const report = await status({ workspace }).catch(() => undefined);
  return report?.sessions.find((session) => session.isCurrent);
}

async function summaryOf(workspace: string, id: string): Promise<SessionSummary | undefined> {
  return (await status({ workspace })).sessions.find((session) => session.id === id);
}

export const initOperation = defineOperation({
  name: 'init',
  title: 'Create the store',
  summary: 'create .rewind/ in a directory and start a session',
  description:
    'Create the store (.rewind/) in the workspace and start its first session; on a workspace that has one, change nothing.',
  input: () =>
    z.object({
      ...sessionInputs(),
      isolated: z
        .boolean()
        .optional()
        .describe('Start an isolated session: it works on a private view of the workspace.'),
      objects: z
        .string()
        .optional()
        .describe(
          'Keep the objects in an S3-compatible bucket, s3://BUCKET/PREFIX (default: REWIND_OBJECTS, else .rewind/objects).',
        ),
      ledger: z
        .string()
        .optional()
        .describe(
          'Keep the ledgers in PostgreSQL, postgres://USER@HOST/DB (default: REWIND_LEDGER, else .rewind/sessions).',
        ),
    }),
  scope: 'workspace',
  annotations: {},
  excludedFrom: {
    mcp: 'the server creates the store itself when a tool is first called',
  },
  run: async (
    target,
    { hashChain, sandbox, network, isolated, objects, ledger },
  ): Promise<InitOutput> => {
    const { workspace } = target;
    const protections = target.protections ?? {};
    let warnings: string[] = [];
    try {
      warnings = checkSandbox(sandbox, workspace);
    } catch (error) {
      // Moot when the current session keeps a sandbox of its own: the option is ignored, and said.
      const current = isolated === true ? undefined : await currentSessionOf(workspace);
      if (current === undefined || current.sandbox === sandbox) throw error;
    }
    const sandboxing = {
      ...(sandbox !== undefined && { sandbox }),
      ...(network === true && { network: true }),
    };
    let result = await init({
      workspace,
      ...(objects !== undefined && { objects }),
      ...(ledger !== undefined && { ledger }),
      hashChain: hashChain === true,
      ...(isolated !== true && sandboxing),
      ...protections,
    });
    const isProtecting = protections.redact !== undefined || protections.blockPrivate === true;
    if (!result.isNewSession && isolated !== true && isProtecting) {
      // The current session takes them as any session opened with them does: for good.
      await (await openSession({ workspace, ...protections })).close();
      result = {
        ...result,
        session: (await summaryOf(workspace, result.session.id)) ?? result.session,
      };
    }
    if (isolated !== true) {
      // Said only when the session differs: a script may run the same init every time.
      const { session } = result;
      const ignoredOptions: SessionOption[] = [];
      if (hashChain === true && !session.isHashChained) ignoredOptions.push('hashChain');
      if (sandbox !== undefined && sandbox !== session.sandbox) ignoredOptions.push('sandbox');
      if (network === true && !session.network) ignoredOptions.push('network');
      const preview = await previewWorkspace({ workspace: result.workspace });
      // What the sandbox asked for would do is moot when the session keeps its own.
      const sandboxWarnings = ignoredOptions.includes('sandbox') ? [] : warnings;
      return { ...result, ignoredOptions, preview, warnings: sandboxWarnings };
    }
    // An isolated session takes the sandbox and the hash chain, as it starts.
    const leftOut: string[] = [];
    const started = await startIsolatedSession({
      workspace,
      ...sandboxing,
      ...(hashChain === true && { hashChain: true }),
      ...protections,
      onWarning: (warning) => leftOut.push(warning),
    });
    await started.close();
    const ignoredOptions: SessionOption[] = [];
    const preview = await previewWorkspace({ workspace: result.workspace });
    const looser = result.isNewSession
      ? []
      : looserWarnings(result.session, await summaryOf(workspace, started.id));
    return {
      ...result,
      isolatedSession: started.id,
      ignoredOptions,
      preview,
      warnings: [...warnings, ...looser, ...leftOut],
    };
  },
});

/** What {@link sessionNewOperation} started, with the warnings of its sandbox. */
export interface SessionNewOutput {
  session: SessionSummary;
  warnings: string[];
}

export const sessionNewOperation = defineOperation({
  name: 'session-new',
  title: 'Start a new session',
  summary: 'start a new session on the store (its own ledger) and make it the current one',
  description:
    'Start a new session on the store, with its own ledger, and make it the current one unless switch is false. The other sessions stay as they are.',
  input: () =>
    z.object({
      ...sessionInputs(),
      switch: z
        .boolean()
        .optional()
        .describe('Make it the current session (default: true); false leaves the current one.'),
    }),
  scope: 'workspace',
  annotations: {},
  excludedFrom: {
    mcp: "it changes the store's current session for every later command and person; the server keeps the session it opened",
  },
  run: async (
    target,
    { hashChain, sandbox, network, switch: isSwitching },
  ): Promise<SessionNewOutput> => {
    const { workspace } = target;
    const warnings = checkSandbox(sandbox, workspace);
    const previous = (await status({ workspace })).sessions.find((session) => session.isCurrent);
    const session = await startSession({
      workspace,
      hashChain: hashChain === true,
      ...(sandbox !== undefined && { sandbox }),
      ...(network === true && { network: true }),
      ...target.protections,
      makeCurrent: isSwitching !== false,
    });
    return { session, warnings: [...warnings, ...looserWarnings(previous, session)] };
  },
});

/** What {@link sessionListOperation} lists: every session of the store, and the current one. */
export interface SessionListOutput {
  currentSession: string | undefined;
  /**
   * The session this call works in when one is named: the one `--session` names, or the MCP
   * server's own (an isolated one, or the one it opened), which may not be the current one.
   */
  workingSession?: string;
  sessions: SessionSummary[];
}

export const sessionListOperation = defineOperation({
  name: 'session-list',
  title: 'List the sessions',
  summary: 'list the sessions of the store, the current one marked',
  description:
    "Every session of the store, oldest first: its id, start time, entry count, isolation, sandbox and network, which one is the store's current one (a person's commands use it), and workingSession: the one these tools work in.",
  input: () => z.object({}),
  scope: 'workspace',
  annotations: { readOnly: true },
  run: async (target): Promise<SessionListOutput> => {
    const { currentSession, sessions } = await status({ workspace: target.workspace });
    const named = await target.sessionId();
    const workingSession = named === undefined ? undefined : (await target.session()).id;
    return { currentSession, ...(workingSession !== undefined && { workingSession }), sessions };
  },
});

export const sessionUseOperation = defineOperation({
  name: 'session-use',
  title: 'Switch the current session',
  summary: 'make a session the current one: the one commands work in when none is named',
  description:
    'Make a session the current one (its id, a unique prefix of four characters or more, or its ledger file name): the one every later command works in when none is named.',
  input: () =>
    z.object({
      id: z
        .string()
        .describe(
          'The session: its id, a unique prefix of four characters or more, or its ledger file name.',
        ),
    }),
  scope: 'workspace',
  annotations: { idempotent: true },
  excludedFrom: {
    mcp: "it changes the store's current session for every later command and person; the server keeps the session it opened",
  },
  run: async ({ workspace }, { id }): Promise<{ session: SessionSummary }> => ({
    session: await useSession({ workspace, session: id }),
  }),
});

export const attachOperation = defineOperation({
  name: 'attach',
  title: 'Resume a shared session here',
  summary:
    'resume on this machine a session whose ledger is in PostgreSQL (and objects in a bucket): its last checkpoint is restored',
  description:
    "Make a store in an empty directory on the shared backends of a session started elsewhere (its ledger's PostgreSQL URL, its objects' bucket), make that session current, and restore its last checkpoint with a rollback journaled in the shared ledger.",
  input: () =>
    z.object({
      session: z
        .string()
        .describe("The session's id, or a unique prefix of four characters or more."),
      ledger: z.string().describe('The PostgreSQL URL its ledger is in: postgres://USER@HOST/DB.'),
      objects: z
        .string()
        .optional()
        .describe('The bucket its objects are in: s3://BUCKET/PREFIX (default: REWIND_OBJECTS).'),
    }),
  scope: 'workspace',
  annotations: {},
  excludedFrom: {
    mcp: 'a person sets up a machine with it; the server works in the workspace it was started in',
  },
  run: async ({ workspace }, { session, ledger, objects }): Promise<AttachResult> =>
    attachShared({ workspace, session, ledger, ...(objects !== undefined && { objects }) }),
});

const sharedBackendsInput = () => ({
  ledger: z
    .string()
    .optional()
    .describe(
      'The PostgreSQL URL of the shared ledgers: postgres://USER@HOST/DB (default: REWIND_LEDGER).',
    ),
  objects: z
    .string()
    .optional()
    .describe('The bucket of the shared objects: s3://BUCKET/PREFIX (default: REWIND_OBJECTS).'),
});

export const sessionFindOperation = defineOperation({
  name: 'session-find',
  title: 'Find sessions in the shared ledgers',
  summary: 'list the sessions in a shared PostgreSQL ledger, of every store, to attach or pull one',
  description:
    'The sessions in a shared ledger database, of every store, most recently written first: all, or those whose id starts with the query or whose host or workspace holds it. Each with its store, start and last write, entry count, and the host and workspace it started in.',
  input: () =>
    z.object({
      query: z
        .string()
        .optional()
        .describe('An id prefix, or part of a host name or workspace path (case ignored).'),
      ledger: sharedBackendsInput().ledger,
      last: wholeNumber(1).optional().describe('At most this many (default 20).'),
    }),
  scope: 'workspace',
  annotations: { readOnly: true },
  excludedFrom: {
    mcp: 'a person looks for a session to resume with it; the server works in its own workspace',
  },
  run: async (_target, input): Promise<{ sessions: SharedSessionInfo[] }> => {
    return {
      sessions: await findSharedSessions({
        ledger: input.ledger,
        ...(input.query !== undefined && { query: input.query }),
        ...(input.last !== undefined && { limit: input.last }),
      }),
    };
  },
});

export const pushOperation = defineOperation({
  name: 'push',
  title: 'Copy a session to the shared backends',
  summary:
    'copy a local session (its entries and objects) to a shared PostgreSQL ledger and bucket',
  description:
    'Copy a session of this store to the shared backends: the objects its entries reach go up to the bucket first, then the entries the shared ledger lacks are inserted exactly as they are (same seq, times, hash chain). Pushing again sends only what was added. Refused, with nothing written, when the shared copy went on with other entries.',
  input: () =>
    z.object({
      ...sharedBackendsInput(),
    }),
  scope: 'session',
  annotations: { idempotent: true },
  excludedFrom: {
    mcp: 'a person shares a session with it; the server works in the workspace it was started in',
  },
  run: async ({ workspace, sessionId }, input): Promise<CopyResult> => {
    const session = await sessionId();
    return pushSession({
      workspace,
      ...(session !== undefined && { session }),
      ledger: input.ledger,
      objects: input.objects,
    });
  },
});

export const pullOperation = defineOperation({
  name: 'pull',
  title: 'Copy a session from the shared backends',
  summary:
    'copy a session (its entries and objects) from a shared PostgreSQL ledger and bucket into this store',
  description:
    "Copy a session from the shared backends into this workspace's store (made when there is none): the objects its entries reach come down first, verified, then the entries this store lacks are appended exactly as they are. The workspace's files are left alone; a rollback brings a checkpoint's. The session becomes current when the store has none.",
  input: () =>
    z.object({
      session: z
        .string()
        .describe("The session's id, or a unique prefix of four characters or more."),
      ...sharedBackendsInput(),
    }),
  scope: 'workspace',
  annotations: { idempotent: true },
  excludedFrom: {
    mcp: 'a person sets up a machine with it; the server works in the workspace it was started in',
  },
  run: async ({ workspace }, input): Promise<CopyResult> =>
    pullSession({
      workspace,
      session: input.session,
      ledger: input.ledger,
      objects: input.objects,
    }),
});

/**
 * What {@link statusOperation} reports: the store, the session the call works in when one is
 * named (as {@link SessionListOutput}'s), and what a commit of an isolated session would do now.
 */
export type StatusOutput = StatusReport & { workingSession?: string; pending?: SessionStatus };

export const statusOperation = defineOperation({
  name: 'status',
  title: 'Store and session status',
  summary:
    'show sessions, the current session, and the size of the store; for an isolated session, what a commit would do',
  description:
    "The store at a glance: every session (isolation, sandbox, network, entry count), the store's current one (a person's commands use it), workingSession (the one these tools work in), the objects stored; and for an isolated session, what a commit would write, create and delete now, and any conflict.",
  input: () => z.object({}),
  scope: 'session',
  annotations: { readOnly: true },
  run: async (target): Promise<StatusOutput> => {
    const named = await target.sessionId();
    const report = await status({ workspace: target.workspace });
    const current = report.sessions.find((session) => session.isCurrent);
    let pending: SessionStatus | undefined;
    let workingSession: string | undefined;
    if (named !== undefined) {
      // A session asked for by name must open: a wrong name is an error, not an empty answer.
      const session = await target.session();
      workingSession = session.id;
      if (session.isolation === 'isolated') pending = await session.status();
    } else if (current?.isolation === 'isolated' && !current.unsupported) {
      // The pending changes are a bonus to the glance: a session that cannot open leaves them out.
      pending = await target
        .session()
        .then((session) => session.status())
        .catch(() => undefined);
    }
    return {
      ...(workingSession !== undefined && { workingSession }),
      ...report,
      ...(pending && { pending }),
    };
  },
});

export const logOperation = defineOperation({
  name: 'log',
  title: 'The session ledger',
  summary: 'show the timeline of a session, one line per ledger entry',
  description:
    "The timeline of what was done, with each action's id, class and state. Filter by kind (action, verification...), by checkpoint, and keep the last entries.",
  input: () =>
    z.object({
      kind: z
        .string()
        .optional()
        .describe('Only entries of this kind or family (verification, action, rollback...).'),
      checkpoint: z.string().optional().describe('Only entries about this checkpoint.'),
      last: wholeNumber(1)
        .optional()
        .describe('Only the last this many entries (after filtering).'),
    }),
  scope: 'session',
  annotations: { readOnly: true },
  run: async (target, { kind, checkpoint, last }): Promise<LogReport> => {
    const session = await target.sessionId();
    const report = await log({
      workspace: target.workspace,
      ...(session !== undefined && { session }),
      ...(kind !== undefined && { kind }),
      ...(checkpoint !== undefined && { checkpoint }),
    });
    return last === undefined ? report : { ...report, entries: report.entries.slice(-last) };
  },
});

export const noteOperation = defineOperation({
  name: 'note',
  title: 'Add a note to the timeline',
  summary: 'add a note to the session timeline, with files attached',
  description:
    'Add a note to the session timeline, for the people who will read it: what you tried, why you stopped. Attached files (paths relative to the workspace) are stored with it.',
  input: () =>
    z.object({
      text: z.string().describe('The note.'),
      attachments: z.array(z.string()).optional().describe('Files to attach.'),
    }),
  scope: 'session',
  annotations: {},
  run: async (target, { text, attachments }) => {
    const session = await target.sessionId();
    return note({
      workspace: target.workspace,
      text,
      attachments: await Promise.all(
        (attachments ?? []).map((attachment) => target.resolveFile(attachment)),
      ),
      ...(session !== undefined && { session }),
      ...(target.onLockWait && { onLockWait: target.onLockWait }),
    });
  },
});

export const verifyOperation = defineOperation({
  name: 'verify',
  title: 'Verify the store',
  summary: 're-hash every referenced object and check every hash chain; exit 1 on any problem',
  description:
    'Check the whole store: every ledger entry in order, every hash chain, every referenced object re-hashed. Lists each problem found.',
  input: () => z.object({}),
  scope: 'workspace',
  annotations: { readOnly: true },
  run: ({ workspace }) => verify({ workspace }),
});

export const gcOperation = defineOperation({
  name: 'gc',
  title: 'Collect garbage',
  summary: 'remove objects that no ledger references, directly or through trees',
  description:
    'Remove the objects that no ledger references, and temporary files left by crashed writes; recent objects are spared.',
  input: () =>
    z.object({
      dryRun: z.boolean().optional().describe('Only list what would be removed.'),
      graceSeconds: wholeNumber(0)
        .optional()
        .describe('Spare unreferenced objects younger than this (default 3600).'),
    }),
  scope: 'workspace',
  annotations: { destructive: true },
  excludedFrom: {
    mcp: 'it deletes objects from the store: maintenance a person runs, not an agent',
  },
  run: ({ workspace, onLockWait }, { dryRun, graceSeconds }) =>
    gc({
      workspace,
      dryRun: dryRun === true,
      ...(graceSeconds !== undefined && { graceMs: graceSeconds * 1000 }),
      ...(onLockWait && { onLockWait }),
    }),
});
