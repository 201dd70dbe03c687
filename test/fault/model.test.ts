import { join } from 'node:path';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { gc, init, openSession, type Session, verify } from '../../src/session/index.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { runCli, wasKilled } from './harness.js';
import {
  applyToDisk,
  applyToModel,
  canEdit,
  changedKeys,
  differences,
  type Edit,
  isNear,
  isRemovedFirst,
  keyOf,
  type Model,
  NAMES,
  readModel,
  resolveEdit,
  showKey,
} from './model.js';

// A model-based test: random sequences of a person's edits (writes, removals, type changes,
// renames, directory swaps, trees moved in from outside with old times, modes, links; names with
// newlines, of 255 bytes, and not valid UTF-8), commands run through
// `exec`, checkpoints, rollbacks, undos, prune, gc, and crashes (the CLI killed at a random call
// that changes the disk, sometimes an edit, then the next command), against an in-memory model of
// the workspace and of what each checkpoint holds. After every step the workspace is what the
// model says; after a crash, as before or as after the operation, with an edit made meanwhile kept
// or saved; at the end every checkpoint restores exactly and `verify` is clean.
// REWIND_MODEL_RUNS (default 6) and REWIND_MODEL_STEPS (default 30) make it longer,
// REWIND_MODEL_SEED (and REWIND_MODEL_PATH) replay a failure, REWIND_MODEL_SHRINK=1 shrinks one
// (slow).

const RUNS = Number(process.env.REWIND_MODEL_RUNS ?? 6);
const STEPS = Number(process.env.REWIND_MODEL_STEPS ?? 30);
const SEED = process.env.REWIND_MODEL_SEED;
const EDIT_CHILD = join(ROOT, 'test/fault/edit-child.mjs');
/** Roughly how many change calls each operation makes here (see inject.mjs). */
const CALLS = { rollback: 70, undo: 60, checkpoint: 50, gc: 12, exec: 60 };

const path = fc
  .array(fc.integer({ min: 0, max: NAMES.length - 1 }), { minLength: 1, maxLength: 3 })
  .map((indexes) => keyOf(indexes.map((index) => NAMES[index] as Buffer)));
const content = fc.constantFrom('one\n', 'two\n', 'three\n', '', `${'a longer text '.repeat(8)}\n`);
const mode = fc.constantFrom(0o644, 0o755, 0o600);

/** Edits a command can make too (see edit-child.mjs). */
const commandEdit: fc.Arbitrary<Edit> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('write' as const), path, content, mode }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), path }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('rename' as const), from: path, to: path }),
  },
);

const edit: fc.Arbitrary<Edit> = fc.oneof(
  { weight: 5, arbitrary: commandEdit },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('mkdir' as const), path }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('symlink' as const),
      path,
      target: fc.constantFrom('a', '../a', 'nowhere', 'b/c d'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('swap' as const), a: path, b: path }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('chmod' as const), path, mode }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('move-in' as const), path, content }) },
);

type Step =
  | { op: 'edit'; edit: Edit }
  | { op: 'checkpoint' }
  | { op: 'rollback'; pick: number }
  | { op: 'undo' }
  | { op: 'exec'; edit: Edit }
  | { op: 'gc' }
  | { op: 'prune'; keepLast: number }
  | {
      op: 'crash';
      what: 'rollback' | 'undo' | 'checkpoint' | 'gc' | 'exec';
      point: number;
      pick: number;
      command: Edit;
      edit: Edit | null;
    };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ op: fc.constant('edit' as const), edit }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('checkpoint' as const) }) },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('rollback' as const), pick: fc.nat(20) }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('undo' as const) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('exec' as const), edit: commandEdit }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('gc' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('prune' as const),
      keepLast: fc.integer({ min: 1, max: 3 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('crash' as const),
      what: fc.constantFrom('rollback', 'undo', 'checkpoint', 'gc', 'exec'),
      point: fc.integer({ min: 1, max: 140 }),
      pick: fc.nat(20),
      command: commandEdit,
      edit: fc.option(edit, { nil: null }),
    }),
  },
);

/** An action the model can undo: the workspace before it and after it. */
interface Undoable {
  id: number;
  pre: Model;
  post: Model;
}

/** How many steps of each kind ran, over all runs, for the summary printed at the end. */
const tally = new Map<string, number>();
const count = (what: string): void => {
  tally.set(what, (tally.get(what) ?? 0) + 1);
};

const copy = (model: Model): Model => new Map(model);
const same = (a: Model, b: Model): boolean => differences(a, b).length === 0;

function describeEdit(edit: Edit): string {
  switch (edit.kind) {
    case 'rename':
      return `rename ${showKey(edit.from)} ${showKey(edit.to)}`;
    case 'swap':
      return `swap ${showKey(edit.a)} ${showKey(edit.b)}`;
    case 'write':
      return `write ${showKey(edit.path)} ${JSON.stringify(edit.content.slice(0, 10))} ${edit.mode.toString(8)}`;
    case 'chmod':
      return `chmod ${showKey(edit.path)} ${edit.mode.toString(8)}`;
    case 'symlink':
      return `symlink ${showKey(edit.path)} -> ${edit.target}`;
    default:
      return `${edit.kind} ${showKey(edit.path)}`;
  }
}

/** One sequence being run: the real workspace and session, and the model of both. */
class Run {
  model: Model = new Map();
  /** Every checkpoint the session holds, oldest first: label → what it holds. */
  readonly checkpoints = new Map<string, Model>();
  readonly undoable: Undoable[] = [];
  readonly trace: string[] = [];
  private count = 0;

  constructor(
    readonly root: string,
    readonly session: Session,
  ) {}

  fail(message: string): never {
    throw new Error(`${message}\nsteps:\n  ${this.trace.join('\n  ')}`);
  }

  /** An error of the product, thrown again with the steps that led to it. */
  rethrow(error: unknown): never {
    if (error instanceof Error && error.message.includes('\nsteps:\n')) throw error;
    this.fail(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  }

  expectWorkspace(expected: Model, what: string): void {
    const found = differences(expected, readModel(this.root));
    if (found.length > 0)
      this.fail(`${what}: the workspace is not the model (model | disk):\n${found.join('\n')}`);
  }

  label(prefix: string): string {
    this.count += 1;
    return `${prefix}${this.count}`;
  }

  pickCheckpoint(pick: number): string | undefined {
    const labels = [...this.checkpoints.keys()];
    return labels.length === 0 ? undefined : labels[pick % labels.length];
  }

  /** The newest action of a kind, as the session lists it. */
  async newestAction(kind: string): Promise<number> {
    const action = (await this.session.actions())
      .filter((candidate) => candidate.kind === kind)
      .at(-1);
    if (!action) this.fail(`no ${kind} action was journaled`);
    return action.id;
  }

  async run(step: Step): Promise<void> {
    const length = this.trace.length;
    try {
      await this.runStep(step);
    } catch (error) {
      this.rethrow(error);
    }
    if (this.trace.length > length) count(step.op);
  }

  private async runStep(step: Step): Promise<void> {
    switch (step.op) {
      case 'edit': {
        const edit = resolveEdit(this.model, step.edit);
        if (!canEdit(this.model, edit)) return;
        this.trace.push(describeEdit(edit));
        applyToDisk(this.root, edit);
        applyToModel(this.model, edit);
        break;
      }
      case 'checkpoint': {
        const label = this.label('c');
        this.trace.push(`checkpoint ${label}`);
        await this.session.checkpoint(label);
        this.checkpoints.set(label, copy(this.model));
        break;
      }
      case 'rollback': {
        const label = this.pickCheckpoint(step.pick);
        if (label === undefined) return;
        this.trace.push(`rollback ${label}`);
        const pre = copy(this.model);
        const rolled = await this.session.rollback(label);
        this.model = copy(this.checkpoints.get(label) as Model);
        if (rolled.id !== undefined)
          this.undoable.push({ id: rolled.id, pre, post: copy(this.model) });
        break;
      }
      case 'undo':
        await this.undo();
        break;
      case 'exec': {
        const edit = resolveEdit(this.model, step.edit);
        if (!canEdit(this.model, edit)) return;
        this.trace.push(`exec ${describeEdit(edit)}`);
        const pre = copy(this.model);
        const ran = await this.session.exec([process.execPath, EDIT_CHILD, JSON.stringify(edit)]);
        if (ran.exitCode !== 0) this.fail(`the command failed: ${ran.stderr}`);
        applyToModel(this.model, edit);
        this.undoable.push({ id: ran.id, pre, post: copy(this.model) });
        break;
      }
      case 'gc':
        this.trace.push('gc');
        await gc({ workspace: this.root, graceMs: 0 });
        break;
      case 'prune': {
        this.trace.push(`prune --keep-last ${step.keepLast}`);
        const labels = [...this.checkpoints.keys()];
        const expected = labels.slice(0, Math.max(0, labels.length - step.keepLast));
        const pruned = (await this.session.prune({ keepLast: step.keepLast })).pruned.map(
          (checkpoint) => checkpoint.label,
        );
        if (pruned.join() !== expected.join()) {
          this.fail(`prune dropped ${pruned.join()} instead of ${expected.join()}`);
        }
        for (const label of pruned) this.checkpoints.delete(label);
        break;
      }
      case 'crash':
        await this.crash(step);
        break;
    }
    this.expectWorkspace(this.model, `after ${this.trace.at(-1)}`);
  }

  /** Undoes the newest action left; one edited over since must refuse, or leave the edits alone. */
  async undo(): Promise<void> {
    const top = this.undoable.pop();
    if (!top) return;
    this.trace.push(`undo #${top.id}`);
    const pre = copy(this.model);
    const isFresh = same(pre, top.post);
    const undone = await this.session.undo(top.id);
    const after = readModel(this.root);
    if (isFresh) {
      if (undone.status !== 'undone')
        this.fail(`undo #${top.id} was refused though nothing changed since`);
      this.model = copy(top.pre);
      this.expectWorkspace(this.model, `undo #${top.id}`);
    } else if (undone.status === 'refused') {
      this.expectWorkspace(pre, `refused undo #${top.id}`);
    } else {
      // Undo never tramples: what was changed since the action is left as it is.
      const changedSince = new Set(changedKeys(pre, top.post));
      const trampled = differences(pre, after, (key) => !changedSince.has(key));
      if (trampled.length > 0) {
        this.fail(
          `undo #${top.id} trampled what was changed since (before | after):\n${trampled.join('\n')}`,
        );
      }
      this.model = after;
    }
    if (undone.status === 'undone')
      this.undoable.push({ id: undone.id, pre, post: copy(this.model) });
  }

  /**
   * Runs an operation through the CLI, killed before its change call `point`; maybe an edit;
   * then the next command (a checkpoint), which finishes or closes what was cut short.
   */
  async crash(step: Extract<Step, { op: 'crash' }>): Promise<void> {
    const pre = copy(this.model);
    let post = pre;
    let argv: string[];
    let kind: string | undefined;
    let createdLabel: string | undefined;
    switch (step.what) {
      case 'rollback': {
        const label = this.pickCheckpoint(step.pick);
        if (label === undefined) return;
        argv = ['rollback', label];
        post = this.checkpoints.get(label) as Model;
        kind = 'rollback';
        break;
      }
      case 'undo': {
        const top = this.undoable.at(-1);
        if (!top || !same(pre, top.post)) return;
        argv = ['undo', String(top.id)];
        post = top.pre;
        kind = 'undo';
        break;
      }
      case 'checkpoint':
        createdLabel = this.label('k');
        argv = ['checkpoint', createdLabel];
        break;
      case 'gc':
        argv = ['gc', '--grace-seconds', '0'];
        break;
      case 'exec': {
        const command = resolveEdit(pre, step.command);
        if (!canEdit(pre, command)) return;
        argv = ['exec', '--', process.execPath, EDIT_CHILD, JSON.stringify(command)];
        post = copy(pre);
        applyToModel(post, command);
        kind = 'exec';
        break;
      }
    }
    const shown = argv[0] === 'exec' ? `exec ${argv.at(-1)}` : argv.join(' ');
    // About as many change calls as the operation makes on a small workspace, so most crashes
    // land inside it.
    const point = 1 + (step.point % CALLS[step.what]);
    this.trace.push(`crash: rewind ${shown}, killed before change ${point}`);
    const ran = await runCli(this.root, argv, { fault: `kill:${point}` });
    count(wasKilled(ran) ? `crash: ${step.what} killed` : `crash: ${step.what} finished`);
    if (!wasKilled(ran)) {
      // It finished before the point: an ordinary run.
      if (ran.code !== 0) this.fail(`rewind ${shown} failed: ${ran.stderr}`);
      this.trace.push('  (finished before the point)');
      this.expectWorkspace(post, `rewind ${shown}`);
      if (step.what === 'undo') this.undoable.pop();
      if (kind) this.undoable.push({ id: await this.newestAction(kind), pre, post: copy(post) });
      if (createdLabel) this.checkpoints.set(createdLabel, copy(pre));
      this.model = copy(post);
      return;
    }
    const halfway = readModel(this.root);
    const wanted = step.edit && resolveEdit(halfway, step.edit);
    const edit = wanted && canEdit(halfway, wanted) ? wanted : undefined;
    if (edit) {
      this.trace.push(`  then ${describeEdit(edit)}`);
      applyToDisk(this.root, edit);
    }
    const found = readModel(this.root);
    const next = this.label('r');
    this.trace.push(`  then checkpoint ${next}`);
    await this.session.checkpoint(next);
    const now = readModel(this.root);
    const leave = (key: string): boolean => isNear(edit, key);
    const isBefore = differences(now, pre, leave).length === 0;
    const isAfter = differences(now, post, leave).length === 0;
    if (!isBefore && !isAfter) {
      this.fail(
        `after recovery the workspace is neither before nor after (disk | before):\n${differences(now, pre, leave).join('\n')}\n(disk | after):\n${differences(now, post, leave).join('\n')}`,
      );
    }
    // The checkpoints now: those the model knows, plus what the crashed command and recovery made.
    const labels = (await this.session.checkpoints()).map((checkpoint) => checkpoint.label);
    const saved: string[] = [];
    for (const label of labels) {
      if (this.checkpoints.has(label) || label === next) continue;
      if (label === createdLabel) this.checkpoints.set(label, copy(pre));
      else if (label.startsWith('saved-before-recovery')) {
        this.checkpoints.set(label, copy(found));
        saved.push(label);
      } else this.fail(`an unexpected checkpoint ${label} appeared`);
    }
    for (const label of this.checkpoints.keys()) {
      if (!labels.includes(label)) this.fail(`checkpoint ${label} is gone`);
    }
    this.checkpoints.set(next, copy(now));
    // An edit made meanwhile is kept, or saved before recovery overwrote it: every path the edit
    // changed (a folder above it only if the edit made it) holds what the edit left there. A
    // recovery that finishes the operation may still remove the folder above a removed path.
    // A path the edit put back as it was before the crashed command cannot be told from one the
    // command had not reached yet: finishing the command may set it again, unless the command had
    // set a path it applies later (see docs/reliability.md). Only other edits count here.
    // Nor can a path the edit removed where the command removes what is there before putting
    // another type in its place: that is the command midway (recovery saves it only when the
    // command had gone past it).
    const unlikeBefore = new Set(changedKeys(found, pre));
    const edited = new Set(
      edit
        ? changedKeys(halfway, found).filter(
            (key) =>
              unlikeBefore.has(key) &&
              !(found.get(key) === undefined && isRemovedFirst(pre.get(key), post.get(key))),
          )
        : [],
    );
    const lost = differences(now, found, (key) => !edited.has(key));
    if (!edit && saved.length > 0) {
      this.fail(`recovery saved ${saved.join()} though nothing was edited since the crash`);
    }
    if (lost.length > 0 && saved.length === 0) {
      this.fail(`the edit made after the crash is lost (disk | as edited):\n${lost.join('\n')}`);
    }
    if (edit) {
      // Whether it was finished is not known: an undo that may be done is not offered again.
      if (step.what === 'undo') this.undoable.pop();
    } else if (isAfter && kind) {
      // An undo that changes nothing may have been finished too: it is not offered again.
      if (step.what === 'undo') this.undoable.pop();
      if (!same(pre, post)) {
        this.undoable.push({ id: await this.newestAction(kind), pre, post: copy(post) });
      }
    }
    this.model = now;
    this.trace.push(
      `  recovered: ${isAfter && !isBefore ? 'after' : isBefore && !isAfter ? 'before' : 'either'}${saved.length > 0 ? `, saved ${saved.join()}` : ''}`,
    );
    const report = await verify({ workspace: this.root });
    if (!report.isOk || report.warnings.length > 0) {
      this.fail(`verify after recovery: ${JSON.stringify([report.problems, report.warnings])}`);
    }
  }

  /** Every checkpoint restores exactly what the model says it holds; undoing those rollbacks, newest first, comes back. */
  async finish(): Promise<void> {
    const start = copy(this.model);
    const rolled: { id: number; pre: Model }[] = [];
    for (const [label, held] of this.checkpoints) {
      this.trace.push(`(end) rollback ${label}`);
      const pre = readModel(this.root);
      const result = await this.session.rollback(label);
      this.expectWorkspace(held, `rolling back to ${label} at the end`);
      if (result.id !== undefined) rolled.push({ id: result.id, pre });
    }
    for (const { id, pre } of rolled.reverse()) {
      this.trace.push(`(end) undo #${id}`);
      const undone = await this.session.undo(id);
      if (undone.status !== 'undone')
        this.fail(`undoing the rollback #${id} at the end was refused`);
      this.expectWorkspace(pre, `undoing the rollback #${id} at the end`);
    }
    this.expectWorkspace(start, 'after the rollbacks at the end and their undos');
    const report = await verify({ workspace: this.root });
    if (!report.isOk || report.warnings.length > 0) {
      this.fail(`verify at the end: ${JSON.stringify([report.problems, report.warnings])}`);
    }
  }
}

describe('the workspace against a model of it', () => {
  it(`edits, checkpoints, rollbacks, undos, gc and crashes never lose anything (${RUNS} runs of up to ${STEPS} steps)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: Math.ceil(STEPS / 2), maxLength: STEPS, size: 'max' }),
        async (steps) => {
          const root = await makeTempDirectory('rewind-model-');
          await init({ workspace: root });
          await using session = await openSession({ workspace: root });
          const run = new Run(root, session);
          for (const one of steps) await run.run(one);
          await run.finish().catch((error: unknown) => run.rethrow(error));
        },
      ),
      {
        numRuns: RUNS,
        ...(SEED !== undefined && { seed: Number(SEED) }),
        ...(process.env.REWIND_MODEL_PATH && { path: process.env.REWIND_MODEL_PATH }),
        endOnFailure: process.env.REWIND_MODEL_SHRINK !== '1',
      },
    );
    console.log(
      [...tally]
        .sort()
        .map(([what, times]) => `${what}: ${times}`)
        .join(', '),
    );
  }, 900_000);
});
