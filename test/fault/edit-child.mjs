// Makes one edit of the model-based test (model.ts) in the current directory, as a command run
// by `rewind exec` would: node edit-child.mjs '{"kind":"write","path":"a/b",...}'.
// Path keys hold one character per byte (latin1), so names that are not UTF-8 pass through.
import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';

const edit = JSON.parse(process.argv[2] ?? '{}');
const at = (key) => Buffer.concat([Buffer.from(process.cwd()), Buffer.from(`/${key}`, 'latin1')]);
const mkdirParents = (key) => {
  const slash = key.lastIndexOf('/');
  if (slash > 0) mkdirSync(at(key.slice(0, slash)), { recursive: true });
};

switch (edit.kind) {
  case 'write':
    rmSync(at(edit.path), { recursive: true, force: true });
    mkdirParents(edit.path);
    writeFileSync(at(edit.path), edit.content);
    chmodSync(at(edit.path), edit.mode);
    break;
  case 'remove':
    rmSync(at(edit.path), { recursive: true, force: true });
    break;
  case 'rename':
    rmSync(at(edit.to), { recursive: true, force: true });
    mkdirParents(edit.to);
    renameSync(at(edit.from), at(edit.to));
    break;
  default:
    throw new Error(`edit-child: no such edit: ${edit.kind}`);
}
