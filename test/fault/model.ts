// The in-memory model of a workspace for the model-based test (model.test.ts), and the edits a
// person makes, applied to the model and to the disk alike.
//
// Names are bytes: a path is a key of its names as latin1 (one character per byte) joined by `/`,
// so names that are not UTF-8 have a key like any other.
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The names paths are made of: few, so that edits collide (renames onto, swaps, type changes). */
export const NAMES: readonly Buffer[] = [
  Buffer.from('a'),
  Buffer.from('b'),
  Buffer.from('c d'),
  Buffer.from('new\nline'),
  // 255 bytes, the longest a name may be: 127 two-byte characters and one more.
  Buffer.from(`${'é'.repeat(127)}z`),
  // Not valid UTF-8 (Latin-1 and stray bytes): kept as bytes, shown as \xHH.
  Buffer.from([0x62, 0xff, 0xfe, 0x2e, 0x74]),
];

/** What a path holds: a file (content and mode), a directory, or a symbolic link. */
export type Node =
  | { type: 'file'; content: string; mode: number }
  | { type: 'directory' }
  | { type: 'symlink'; target: string };

/** A workspace: path key → what is there. */
export type Model = Map<string, Node>;

export const keyOf = (names: readonly Buffer[]): string =>
  names.map((name) => name.toString('latin1')).join('/');

/** The absolute path of a key under `root`, as bytes. */
export const absoluteOf = (root: string, key: string): Buffer =>
  Buffer.concat([Buffer.from(root), Buffer.from(`/${key}`, 'latin1')]);

/**
 * A key as people read it: each name as text where it is UTF-8 (else its bytes as \xHH), a long
 * one cut short with its length.
 */
export const showKey = (key: string): string =>
  JSON.stringify(
    key
      .split('/')
      .map((name) => {
        const bytes = Buffer.from(name, 'latin1');
        const text = bytes.toString('utf8');
        const shown = Buffer.from(text).equals(bytes)
          ? text
          : name.replace(/[^\x20-\x7e]/g, (char) => `\\x${char.charCodeAt(0).toString(16)}`);
        return bytes.length > 40 ? `${shown.slice(0, 4)}…(${bytes.length} bytes)` : shown;
      })
      .join('/'),
  );

const parentsOf = (key: string): string[] => {
  const names = key.split('/');
  return names.slice(0, -1).map((_, index) => names.slice(0, index + 1).join('/'));
};
const isUnder = (key: string, ancestor: string): boolean => key.startsWith(`${ancestor}/`);
const isAtOrUnder = (key: string, ancestor: string): boolean =>
  key === ancestor || isUnder(key, ancestor);

/** Whether a directory above `key` is something else: nothing can be made there. */
export const isBlocked = (model: Model, key: string): boolean =>
  parentsOf(key).some((parent) => {
    const node = model.get(parent);
    return node !== undefined && node.type !== 'directory';
  });

function removeTree(model: Model, key: string): void {
  for (const path of [...model.keys()]) if (isAtOrUnder(path, key)) model.delete(path);
}

function makeParents(model: Model, key: string): void {
  for (const parent of parentsOf(key)) model.set(parent, { type: 'directory' });
}

function subtree(model: Model, key: string): [string, Node][] {
  return [...model].filter(([path]) => isAtOrUnder(path, key));
}

/** An edit a person makes to the workspace. */
export type Edit =
  | { kind: 'write'; path: string; content: string; mode: number }
  | { kind: 'remove'; path: string }
  | { kind: 'mkdir'; path: string }
  | { kind: 'symlink'; path: string; target: string }
  | { kind: 'rename'; from: string; to: string }
  | { kind: 'swap'; a: string; b: string }
  | { kind: 'chmod'; path: string; mode: number }
  | { kind: 'move-in'; path: string; content: string };

/**
 * The edit with each path it needs to exist (what it removes, renames, swaps, changes the mode
 * of) replaced, when absent, by a path the model holds, chosen by the absent path: random paths
 * rarely exist.
 */
export function resolveEdit(model: Model, edit: Edit): Edit {
  const keys = [...model.keys()].sort();
  const existing = (key: string): string => {
    if (model.has(key) || keys.length === 0) return key;
    let hash = 0;
    for (const char of key) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
    return keys[hash % keys.length] as string;
  };
  switch (edit.kind) {
    case 'remove':
    case 'chmod':
      return { ...edit, path: existing(edit.path) };
    case 'rename':
      return { ...edit, from: existing(edit.from) };
    case 'swap':
      return { ...edit, a: existing(edit.a), b: existing(edit.b) };
    default:
      return edit;
  }
}

/** Whether an edit can be made on this model; one that cannot is skipped. */
export function canEdit(model: Model, edit: Edit): boolean {
  switch (edit.kind) {
    case 'write':
    case 'mkdir':
    case 'symlink':
    case 'move-in':
      return !isBlocked(model, edit.path);
    case 'remove':
      return model.has(edit.path);
    case 'chmod':
      return model.get(edit.path)?.type === 'file';
    case 'rename':
      return (
        model.has(edit.from) &&
        !isAtOrUnder(edit.to, edit.from) &&
        !isUnder(edit.from, edit.to) &&
        !isBlocked(model, edit.to)
      );
    case 'swap':
      return (
        model.has(edit.a) &&
        model.has(edit.b) &&
        !isAtOrUnder(edit.a, edit.b) &&
        !isAtOrUnder(edit.b, edit.a)
      );
  }
}

/** What the files moved in from outside hold: two files, one in a directory. */
const movedIn = (content: string): [string, string][] => [
  ['a', `${content} outside\n`],
  ['b/a', `${content} inside\n`],
];

/** The model after an edit that {@link canEdit} allows. */
export function applyToModel(model: Model, edit: Edit): void {
  switch (edit.kind) {
    case 'write':
      removeTree(model, edit.path);
      makeParents(model, edit.path);
      model.set(edit.path, { type: 'file', content: edit.content, mode: edit.mode });
      return;
    case 'remove':
      removeTree(model, edit.path);
      return;
    case 'mkdir':
      if (model.get(edit.path)?.type === 'directory') return;
      removeTree(model, edit.path);
      makeParents(model, edit.path);
      model.set(edit.path, { type: 'directory' });
      return;
    case 'symlink':
      removeTree(model, edit.path);
      makeParents(model, edit.path);
      model.set(edit.path, { type: 'symlink', target: edit.target });
      return;
    case 'rename': {
      const moved = subtree(model, edit.from);
      removeTree(model, edit.from);
      removeTree(model, edit.to);
      makeParents(model, edit.to);
      for (const [path, node] of moved) model.set(edit.to + path.slice(edit.from.length), node);
      return;
    }
    case 'swap': {
      const a = subtree(model, edit.a);
      const b = subtree(model, edit.b);
      removeTree(model, edit.a);
      removeTree(model, edit.b);
      for (const [path, node] of a) model.set(edit.b + path.slice(edit.a.length), node);
      for (const [path, node] of b) model.set(edit.a + path.slice(edit.b.length), node);
      return;
    }
    case 'chmod': {
      const node = model.get(edit.path);
      if (node?.type === 'file') model.set(edit.path, { ...node, mode: edit.mode });
      return;
    }
    case 'move-in':
      removeTree(model, edit.path);
      makeParents(model, edit.path);
      model.set(edit.path, { type: 'directory' });
      model.set(`${edit.path}/b`, { type: 'directory' });
      for (const [inner, text] of movedIn(edit.content)) {
        model.set(`${edit.path}/${inner}`, { type: 'file', content: text, mode: 0o644 });
      }
      return;
  }
}

function mkdirParents(root: string, key: string): void {
  const parents = parentsOf(key);
  const last = parents.at(-1);
  if (last !== undefined) mkdirSync(absoluteOf(root, last), { recursive: true });
}

/** A month ago: what a tree moved in from elsewhere may carry as its times. */
const past = (): Date => new Date(Date.now() - 30 * 86_400_000);

/** Makes an edit that {@link canEdit} allows on the disk under `root`, as a person would. */
export function applyToDisk(root: string, edit: Edit): void {
  const at = (key: string): Buffer => absoluteOf(root, key);
  switch (edit.kind) {
    case 'write':
      rmSync(at(edit.path), { recursive: true, force: true });
      mkdirParents(root, edit.path);
      writeFileSync(at(edit.path), edit.content);
      chmodSync(at(edit.path), edit.mode);
      return;
    case 'remove':
      rmSync(at(edit.path), { recursive: true, force: true });
      return;
    case 'mkdir':
      if (lstatSync(at(edit.path), { throwIfNoEntry: false })?.isDirectory()) return;
      rmSync(at(edit.path), { recursive: true, force: true });
      mkdirSync(at(edit.path), { recursive: true });
      return;
    case 'symlink':
      rmSync(at(edit.path), { recursive: true, force: true });
      mkdirParents(root, edit.path);
      symlinkSync(edit.target, at(edit.path));
      return;
    case 'rename':
      rmSync(at(edit.to), { recursive: true, force: true });
      mkdirParents(root, edit.to);
      renameSync(at(edit.from), at(edit.to));
      return;
    case 'swap': {
      const aside = absoluteOf(root, '.swap-aside');
      renameSync(at(edit.a), aside);
      renameSync(at(edit.b), at(edit.a));
      renameSync(aside, at(edit.b));
      return;
    }
    case 'chmod':
      chmodSync(at(edit.path), edit.mode);
      return;
    case 'move-in': {
      // Made elsewhere, its times set a month back, then renamed in: nothing in it is newer
      // than the last snapshot but the directory entry itself.
      const outside = join(mkdtempSync(join(tmpdir(), 'rewind-model-outside-')), 'tree');
      mkdirSync(join(outside, 'b'), { recursive: true });
      for (const [inner, text] of movedIn(edit.content)) writeFileSync(join(outside, inner), text);
      for (const inner of ['a', 'b/a', 'b', '']) utimesSync(join(outside, inner), past(), past());
      rmSync(at(edit.path), { recursive: true, force: true });
      mkdirParents(root, edit.path);
      renameSync(outside, at(edit.path));
      rmSync(join(outside, '..'), { recursive: true, force: true });
      return;
    }
  }
}

/** The name of a temporary file Rewind writes a restored file to. */
const TEMPORARY = /^\..+\.rewind-[0-9a-f]{12}\.rewind-tmp$/s;

/** What is on disk under `root` (but `.rewind` and Rewind's own temporary files), as a model. */
export function readModel(root: string): Model {
  const model: Model = new Map();
  const visit = (key: string): void => {
    const names = readdirSync(key === '' ? Buffer.from(root) : absoluteOf(root, key), {
      encoding: 'buffer',
    });
    for (const name of names.sort(Buffer.compare)) {
      const text = name.toString('latin1');
      if (key === '' && text === '.rewind') continue;
      if (TEMPORARY.test(text)) continue;
      const path = key === '' ? text : `${key}/${text}`;
      const absolute = absoluteOf(root, path);
      const stats = lstatSync(absolute);
      if (stats.isDirectory()) {
        model.set(path, { type: 'directory' });
        visit(path);
      } else if (stats.isSymbolicLink()) {
        model.set(path, { type: 'symlink', target: readlinkSync(absolute, 'utf8') });
      } else {
        model.set(path, {
          type: 'file',
          content: readFileSync(absolute, 'utf8'),
          mode: stats.mode & 0o777,
        });
      }
    }
  };
  visit('');
  return model;
}

const describeNode = (node: Node | undefined): string =>
  node === undefined
    ? '(absent)'
    : node.type === 'file'
      ? `file ${node.mode.toString(8)} ${JSON.stringify(node.content)}`
      : node.type === 'symlink'
        ? `link ${node.target}`
        : 'dir';

const sameNode = (a: Node | undefined, b: Node | undefined): boolean =>
  describeNode(a) === describeNode(b);

/**
 * Whether a restore from `before` to `after` removes what is at the path before placing its own
 * (another type; a link with another target): killed in between, the path is absent.
 */
export function isRemovedFirst(before: Node | undefined, after: Node | undefined): boolean {
  if (!before || !after) return false;
  if (before.type === 'symlink' && after.type === 'symlink') return before.target !== after.target;
  return before.type !== after.type && (before.type === 'directory' || after.type !== 'file');
}

/** The paths two models disagree on, leaving out those `leave` names. */
export function changedKeys(
  a: Model,
  b: Model,
  leave: (key: string) => boolean = () => false,
): string[] {
  const keys = new Set([...a.keys(), ...b.keys()]);
  return [...keys].filter((key) => !leave(key) && !sameNode(a.get(key), b.get(key))).sort();
}

/** {@link changedKeys}, each with what either side holds there, for a failure message. */
export function differences(
  a: Model,
  b: Model,
  leave: (key: string) => boolean = () => false,
): string[] {
  return changedKeys(a, b, leave).map(
    (key) => `${showKey(key)}: ${describeNode(a.get(key))} | ${describeNode(b.get(key))}`,
  );
}

/** Whether `key` is the path an edit made, under it, or a directory above it. */
export function isNear(edit: Edit | undefined, key: string): boolean {
  if (!edit) return false;
  const paths =
    edit.kind === 'rename'
      ? [edit.from, edit.to]
      : edit.kind === 'swap'
        ? [edit.a, edit.b]
        : [edit.path];
  return paths.some((path) => isAtOrUnder(key, path) || isUnder(path, key));
}
