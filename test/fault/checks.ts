import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { log, openSession, status, verify } from '../../src/session/index.js';
import { createObjectStore } from '../../src/store/index.js';
import {
  describeDifference,
  fileSignature,
  readState,
  type State,
  sameState,
  treeState,
  without,
} from '../helpers/state.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { copyTree, type Run, runCli } from './harness.js';
import { type Edit, isLeftOut, type Prepared, type Scenario } from './scenarios.js';

/** A scenario made ready once, and what its operation does when nothing goes wrong. */
export interface Template {
  scenario: Scenario;
  directory: string;
  prepared: Prepared;
  /** The whole workspace (but .rewind) before and after the operation. */
  before: State;
  after: State;
  /** What every checkpoint of every session holds: session id → label → tracked state. */
  checkpoints: Map<string, Map<string, State>>;
  /** The last seq of every session before the operation. */
  lastSeq: Map<string, number>;
  /** The calls the operation makes (see inject.mjs): changes, and changes and syncs. */
  changeCalls: number;
  allCalls: number;
  /** The reference run. */
  reference: Run;
}

/** The name of a temporary file Rewind writes a restored file to (see workspace/apply.ts). */
const TEMPORARY = /(^|\/)\.[^/]+\.rewind-[0-9a-f]{12}\.rewind-tmp$/;

/** What a snapshot should hold of a state: what the rules keep, and no temporary file of Rewind's. */
export const tracked = (state: State): State =>
  without(state, (path) => isLeftOut(path) || TEMPORARY.test(path));

async function allCheckpoints(workspace: string): Promise<Map<string, Map<string, State>>> {
  const store = createObjectStore(join(workspace, '.rewind'));
  const result = new Map<string, Map<string, State>>();
  for (const summary of (await status({ workspace })).sessions) {
    await using session = await openSession({ workspace, session: summary.id });
    const labels = new Map<string, State>();
    for (const checkpoint of await session.checkpoints()) {
      labels.set(checkpoint.label, await treeState(store, checkpoint.tree));
    }
    result.set(summary.id, labels);
  }
  return result;
}

async function lastSeqs(workspace: string): Promise<Map<string, number>> {
  return new Map(
    (await status({ workspace })).sessions.map((summary) => [summary.id, summary.entryCount]),
  );
}

/** A fresh directory to copy a template into. */
export function scratch(): Promise<string> {
  return makeTempDirectory('rewind-fault-run-');
}

/** Copies a template's workspace to a fresh place and returns its path. */
export async function copyOf(template: { directory: string }): Promise<string> {
  const target = join(await scratch(), 'workspace');
  copyTree(template.directory, target);
  return target;
}

/** Prepares a scenario, then runs its operation once on a copy, counting its calls. */
export async function makeTemplate(scenario: Scenario, workspace: string): Promise<Template> {
  const prepared = await scenario.prepare(workspace);
  const before = await readState(workspace);
  const checkpoints = await allCheckpoints(workspace);
  const lastSeq = await lastSeqs(workspace);
  const copy = await copyOf({ directory: workspace });
  const faultLog = join(copy, '..', 'calls.log');
  const reference = await runCli(copy, prepared.argv, { fault: 'count', faultLog });
  const calls = (await readFile(faultLog, 'utf8')).split('\n').filter((line) => line !== '');
  const after = await readState(copy);
  return {
    scenario,
    directory: workspace,
    prepared,
    before,
    after,
    checkpoints,
    lastSeq,
    changeCalls: calls.filter((line) => line.startsWith('change ')).length,
    allCalls: calls.length,
    reference,
  };
}

/** Whether `path` is the edited path, under it, or a directory above it. */
function isNearEdit(edit: Edit | undefined, path: string): boolean {
  if (!edit) return false;
  return path === edit.path || path.startsWith(`${edit.path}/`) || edit.path.startsWith(`${path}/`);
}

/** Which of the template's states `state` is, leaving out what an edit touched. */
export function whichState(
  template: Template,
  state: State,
  edit?: Edit,
): 'before' | 'after' | 'other' {
  const leave = (path: string) => isNearEdit(edit, path);
  const current = without(state, leave);
  if (sameState(current, without(template.before, leave))) return 'before';
  if (sameState(current, without(template.after, leave))) return 'after';
  return 'other';
}

/** Makes an edit, as a person would. */
export async function makeEdit(workspace: string, edit: Edit): Promise<void> {
  const absolute = join(workspace, edit.path);
  if (edit.content === undefined) {
    await rm(absolute, { recursive: true, force: true });
    return;
  }
  // What the operation left there (a directory where a file was) gives way.
  await rm(absolute, { recursive: true, force: true });
  await mkdir(dirname(absolute), { recursive: true });
  await writeFile(absolute, edit.content);
}

export interface CheckOptions {
  /** Edit a file after the fault, before the next command. */
  edit?: Edit;
  /**
   * A command that reads (status, log, verify, gc) run first, which must finish or name an
   * interrupted operation left pending.
   */
  report?: string[];
  /** The workspace may be torn right after the fault, before any recovery. */
  isTornAllowed: boolean;
  /** The workspace may be neither before nor after after recovery (a command cut midway). */
  isPartialAllowed: boolean;
}

/** The body of every entry appended to a session after `since`. */
async function entriesSince(
  workspace: string,
  session: string,
  since: number,
): Promise<{ kind: string; body: Record<string, unknown> }[]> {
  const reading = await log({ workspace, session });
  return reading.entries
    .filter((line) => line.seq > since)
    .map((line) => ({ kind: line.kind, body: line.entry.body }));
}

/**
 * Everything that must hold after a fault: the next command works (and finishes what was
 * interrupted, or refuses and says so), commands that only read name what is left pending, the
 * workspace is before or after (an edit made meanwhile is kept or saved), every checkpoint holds
 * what it held and still restores exactly, a checkpoint recovery saved holds the workspace as it
 * found it, `verify` is clean before and after recovery, the ledger reads, and what the
 * operation replaced can be brought back. Returns the problems found, empty when there are none.
 */
export async function checkAfterFault(
  template: Template,
  workspace: string,
  options: CheckOptions,
): Promise<string[]> {
  const problems: string[] = [];
  const prepared = template.prepared;
  const { edit } = options;
  const early = await verify({ workspace });
  if (!early.isOk) {
    problems.push(`verify before recovery: ${JSON.stringify(early.problems).slice(0, 600)}`);
  }
  if (!options.isTornAllowed) {
    const state = await readState(workspace);
    if (whichState(template, state) === 'other') {
      problems.push(
        `the workspace is torn right after the fault (neither before nor after):\n${describeDifference(template.before, state)}`,
      );
    }
  }
  if (edit) await makeEdit(workspace, edit);

  const pending = (await status({ workspace })).sessions.filter((session) => session.interrupted);
  if (options.report) {
    const reported = await runCli(workspace, options.report);
    const text = `${reported.stdout}\n${reported.stderr}`;
    if (reported.code !== 0) {
      problems.push(`rewind ${options.report.join(' ')} failed (${reported.code}): ${text.trim()}`);
    } else if (pending.length > 0 && !/interrupted|cut short/i.test(text)) {
      problems.push(
        `rewind ${options.report.join(' ')} neither finished nor named the interrupted ${pending.map((session) => `${session.interrupted?.kind} #${session.interrupted?.id}`).join(', ')}:\n${text.trim()}`,
      );
    }
  }
  const found = await readState(workspace);

  // The next command a person runs: it finishes whatever was interrupted first.
  const next = await runCli(workspace, ['checkpoint', 'recovered']);
  if (next.code !== 0) {
    problems.push(`the next command failed (${next.code}): ${next.stderr.trim()}`);
    return problems;
  }
  const state = await readState(workspace);
  const sessionId = prepared.session ?? ([...template.checkpoints.keys()][0] as string);
  const since = template.lastSeq.get(sessionId) ?? 0;
  const appended = await entriesSince(workspace, sessionId, since);
  // A commit to the workspace that paths edited since its crash would have overwritten is
  // closed, not finished: the workspace may then hold some of it, path by path.
  const isRefused = appended.some(
    (entry) =>
      entry.kind === 'action-failed' &&
      (entry.body.error as { code?: string } | undefined)?.code === 'DRIFTED',
  );
  const which = whichState(template, state, edit);
  const temporaries = [...state.keys()].filter((path) => TEMPORARY.test(path));
  if (temporaries.length > 0) {
    problems.push(`temporary files left in the workspace: ${temporaries.join(', ')}`);
  }
  // A commit refused over edits puts back what it had written: the workspace is as before.
  if (which === 'other' && !options.isPartialAllowed) {
    problems.push(
      `after recovery the workspace is neither before nor after${isRefused ? ' (the commit was refused over edits, and should have been put back)' : ''}; against before:\n${describeDifference(template.before, state)}\nagainst after:\n${describeDifference(template.after, state)}`,
    );
  }
  if (isRefused && !edit) problems.push('recovery refused to finish though nothing was edited');

  const checkpoints = await allCheckpoints(workspace);
  const recovered = checkpoints.get(sessionId)?.get('recovered');
  if (!recovered) problems.push('the checkpoint taken by the next command is missing');
  // The recovered checkpoint holds the workspace: the host's for the shared session; an
  // isolated session's checkpoint holds its view, which the operation does not change.
  if (recovered && prepared.session === undefined && !sameState(recovered, tracked(state))) {
    problems.push(
      `the checkpoint taken after recovery does not hold the workspace:\n${describeDifference(recovered, tracked(state))}`,
    );
  }
  for (const [session, labels] of template.checkpoints) {
    for (const [label, held] of labels) {
      const now = checkpoints.get(session)?.get(label);
      if (!now) problems.push(`checkpoint ${label} of session ${session} is gone`);
      else if (!sameState(now, held)) {
        problems.push(`checkpoint ${label} changed:\n${describeDifference(held, now)}`);
      }
    }
  }
  if (prepared.createsCheckpoint) {
    const created = checkpoints.get(sessionId)?.get(prepared.createsCheckpoint);
    if (created && !sameState(created, tracked(template.before))) {
      problems.push(
        `checkpoint ${prepared.createsCheckpoint} does not hold the workspace it was taken of:\n${describeDifference(tracked(template.before), created)}`,
      );
    }
  }
  // What recovery saved before overwriting is the workspace as it found it, nothing else; and
  // it saves only what was edited since the fault: nothing when nothing was.
  for (const [label, held] of checkpoints.get(sessionId) ?? []) {
    if (!label.startsWith('saved-before-recovery')) continue;
    if (!edit && !template.checkpoints.get(sessionId)?.has(label)) {
      problems.push(`recovery saved ${label} though nothing was edited since the fault`);
    }
    if (!sameState(held, tracked(found))) {
      problems.push(
        `checkpoint ${label} does not hold the workspace recovery found:\n${describeDifference(tracked(found), held)}`,
      );
    }
  }
  if (edit?.content !== undefined) {
    const signature = fileSignature(0o644, Buffer.from(edit.content));
    const isKept =
      state.get(edit.path) === signature ||
      [...checkpoints.values()].some((labels) =>
        [...labels.values()].some((held) => held.get(edit.path) === signature),
      );
    if (!isKept) {
      problems.push(
        `the edit made to ${edit.path} after the crash is lost: neither in the workspace (${state.get(edit.path)}) nor in any checkpoint`,
      );
    }
  }

  const late = await verify({ workspace });
  if (!late.isOk) {
    problems.push(`verify after recovery: ${JSON.stringify(late.problems).slice(0, 600)}`);
  }
  if (late.warnings.length > 0) problems.push(`verify warns: ${late.warnings.join('; ')}`);
  for (const summary of (await status({ workspace })).sessions) {
    if (summary.interrupted) {
      problems.push(`session ${summary.id} still has ${summary.interrupted.kind} pending`);
    }
    const reading = await log({ workspace, session: summary.id });
    if (reading.entries.length === 0) problems.push(`session ${summary.id} reads as empty`);
  }
  if (problems.length > 0) return problems;

  // Nothing is lost: what the operation replaced comes back.
  if (prepared.actionKind && !edit) {
    await using session = await openSession({
      workspace,
      ...(prepared.session && { session: prepared.session }),
    });
    const action = (await session.actions()).find(
      (candidate) => candidate.id > since && candidate.kind === prepared.actionKind,
    );
    if (!action) {
      if (which !== 'before') {
        problems.push(
          `the workspace changed (${which}) but no ${prepared.actionKind} was journaled`,
        );
      }
    } else if (which !== 'before' || action.state === 'done') {
      const undone = await session.undo(action.id);
      const back = await readState(workspace);
      if (undone.status !== 'undone') {
        problems.push(`undoing ${prepared.actionKind} #${action.id} (${action.state}) was refused`);
      } else if (!sameState(back, template.before)) {
        problems.push(
          `undoing ${prepared.actionKind} #${action.id} (${action.state}) did not bring the workspace back:\n${describeDifference(template.before, back)}`,
        );
      }
    }
  }
  if (prepared.probeUndo !== undefined) {
    await using session = await openSession({ workspace });
    const undone = await session.undo(prepared.probeUndo).catch((error: Error) => error);
    if (undone instanceof Error || undone.status !== 'undone') {
      problems.push(
        `an earlier action (#${prepared.probeUndo}) can no longer be undone: ${undone instanceof Error ? undone.message : undone.status}`,
      );
    }
  }
  problems.push(...(await probeRollbacks(workspace, template)));
  const final = await verify({ workspace });
  if (!final.isOk) {
    problems.push(`verify at the end: ${JSON.stringify(final.problems).slice(0, 600)}`);
  }
  return problems;
}

/**
 * Every checkpoint of the probe session still restores exactly what it held, leaving what the
 * rules leave out alone; then undoing those rollbacks, newest first, brings the workspace back.
 */
async function probeRollbacks(workspace: string, template: Template): Promise<string[]> {
  const problems: string[] = [];
  const probe = template.checkpoints.get(template.prepared.probeSession) ?? new Map();
  await using session = await openSession({ workspace, session: template.prepared.probeSession });
  const start = await readState(workspace);
  const states: { id: number; before: State }[] = [];
  for (const [label, held] of probe) {
    const before = await readState(workspace);
    const rolled = await session.rollback(label);
    const restored = await readState(workspace);
    if (!sameState(tracked(restored), held)) {
      problems.push(
        `rolling back to ${label} does not restore it:\n${describeDifference(held, tracked(restored))}`,
      );
    }
    const leftOut = (state: State) => without(state, (path) => !isLeftOut(path));
    if (!sameState(leftOut(restored), leftOut(before))) {
      problems.push(`rolling back to ${label} touched paths the rules leave out`);
    }
    if (rolled.id !== undefined) states.push({ id: rolled.id, before });
  }
  for (const { id, before } of states.reverse()) {
    const undone = await session.undo(id);
    const again = await readState(workspace);
    if (undone.status !== 'undone' || !sameState(again, before)) {
      problems.push(
        `undoing the probe rollback #${id} did not bring the workspace back (${undone.status}):\n${describeDifference(before, again)}`,
      );
      break;
    }
  }
  if (problems.length === 0 && !sameState(await readState(workspace), start)) {
    problems.push('after the probe rollbacks and their undos the workspace is not as it was');
  }
  return problems;
}
