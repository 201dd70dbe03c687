import { chmod, mkdir, rename, rm, unlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { init, openSession, useSession } from '../../src/session/index.js';
import { git } from '../helpers/git.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

/** Deterministic bytes that are not text: a stand-in for an image. */
function binary(size: number, seed: number): Buffer {
  const bytes = Buffer.alloc(size);
  let state = seed >>> 0;
  for (let index = 0; index < size; index++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    bytes[index] = state >>> 24;
  }
  return bytes;
}

const GUIDE = Array.from({ length: 80 }, (_, line) => `Line ${line} of the guide.`).join('\n');

/**
 * Paths no operation may touch, because git (and so Rewind) leaves them out or they are not the
 * workspace's: `.git`, `node_modules`, `dist`, `.env` and logs.
 */
export function isLeftOut(path: string): boolean {
  const top = path.split('/')[0] as string;
  return (
    top === '.git' ||
    top === 'node_modules' ||
    top === 'dist' ||
    top === '.env' ||
    /(^|\/)[^/]*\.log$/.test(path)
  );
}

/**
 * A workspace as people have them: a git repository with a commit, a .gitignore, dependencies,
 * build output, a secret in .env, a log, a binary, an executable script, a symbolic link, an empty
 * file, a name with spaces and accents; and a Rewind store with one session.
 */
export async function realisticWorkspace(): Promise<string> {
  const workspace = await makeTempDirectory('rewind-fault-');
  await lay(workspace, {
    '.gitignore': 'node_modules/\ndist/\n.env\n*.log\n',
    'package.json': '{ "name": "demo", "version": "1.0.0", "type": "module" }\n',
    'README.md': '# demo\n\nA demo project.\n',
    'src/index.js': "import { pad } from './lib/strings.js';\nconsole.log(pad('x'));\n",
    'src/lib/strings.js': "export const pad = (text) => ' ' + text + ' ';\n",
    'src/lib/numbers.js': 'export const twice = (n) => 2 * n;\n',
    'src/empty.txt': '',
    'src/ünïcode ñame.txt': 'unicode\n',
    'docs/guide.md': GUIDE,
    'docs/latest.md': { link: 'guide.md' },
    'scripts/build.sh': { text: '#!/bin/sh\necho build\n', mode: 0o755 },
    'node_modules/left-pad/package.json': '{ "name": "left-pad" }\n',
    'node_modules/left-pad/index.js': 'module.exports = (s) => s;\n',
    'dist/index.js': 'console.log(" x ");\n',
    '.env': 'API_KEY=sk-not-a-real-key\n',
    'npm-debug.log': 'debug\n',
  });
  await writeFile(join(workspace, 'docs/logo.png'), binary(3000, 7));
  git(workspace, ['init', '-q']);
  git(workspace, ['add', '-A']);
  git(workspace, ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'initial']);
  await init({ workspace });
  return workspace;
}

/**
 * What a person does between a crash and the next command: writes `content` to `path` (creating
 * its parents), or removes `path` when there is no content.
 */
export interface Edit {
  path: string;
  content?: string;
}

/** What a scenario leaves ready: the operation to run on it, and what to check after. */
export interface Prepared {
  /** The CLI arguments of the operation. */
  argv: string[];
  /**
   * Edits a person makes after a crash, before the next command (each run tries none or one):
   * to a path the operation changes, inside a directory it removes or creates, and so on.
   */
  edits: Edit[];
  /** The kind of the action the operation journals, if it journals one. */
  actionKind?: 'rollback' | 'undo' | 'exec' | 'commit';
  /** The label of the checkpoint the operation creates, if it creates one. */
  createsCheckpoint?: string;
  /** An earlier action that must still be undoable afterwards (its objects must survive). */
  probeUndo?: number;
  /** The session the operation works in, when it is not the first one (commit's isolated one). */
  session?: string;
  /** The session holding the checkpoint to restore as a final probe. */
  probeSession: string;
}

export interface Scenario {
  name: string;
  /** How many kill points to try by default (REWIND_FAULT_POINTS overrides). */
  budget: number;
  /** How many write errors to try by default (REWIND_FAULT_POINTS overrides). */
  errorBudget: number;
  prepare(workspace: string): Promise<Prepared>;
}

/** Edits that exercise every kind of change: content, deletion, creation, directory rename, mode, type. */
async function editEverything(workspace: string, round: string): Promise<void> {
  const at = (path: string) => join(workspace, path);
  await writeFile(at('src/index.js'), `console.log('${round}');\n`);
  await unlink(at('src/lib/numbers.js'));
  await mkdir(at(`src/${round}/deep`), { recursive: true });
  await writeFile(at(`src/${round}/feature.js`), `export const feature = '${round}';\n`);
  await writeFile(at(`src/${round}/deep/data.json`), `{ "round": "${round}" }\n`);
  await rename(at('docs'), at(`docs-${round}`));
  await chmod(at('scripts/build.sh'), 0o644);
  await rm(at('src/empty.txt'));
  await mkdir(at('src/empty.txt'));
  await writeFile(at('src/empty.txt/now-a-directory'), 'dir\n');
  await writeFile(at('README.md'), `# demo ${round}\n`);
  // Build output and dependencies change too; nothing may touch them.
  await writeFile(at('dist/index.js'), `console.log('${round}');\n`);
  await writeFile(at('node_modules/left-pad/index.js'), `module.exports = '${round}';\n`);
}

/** A tree moved in from outside the workspace with old timestamps. */
async function moveTreeIn(workspace: string, name: string): Promise<void> {
  const outside = join(await makeTempDirectory('rewind-outside-'), 'tree');
  await lay(outside, { 'a.txt': 'from outside\n', 'inner/b.txt': 'b\n' });
  const past = new Date(Date.now() - 30 * 86_400_000);
  for (const path of ['a.txt', 'inner/b.txt', 'inner', ''])
    await utimes(join(outside, path), past, past);
  await rename(outside, join(workspace, name));
}

const sessionOf = async (workspace: string): Promise<string> => {
  await using session = await openSession({ workspace });
  return session.id;
};

/** An edit that writes what a person typed after a crash at `path`. */
const typed = (path: string): Edit => ({ path, content: `typed after the crash into ${path}\n` });

export const SCENARIOS: Scenario[] = [
  {
    name: 'rollback',
    budget: 10,
    errorBudget: 9,
    async prepare(workspace) {
      await using session = await openSession({ workspace });
      await session.checkpoint('base');
      await editEverything(workspace, 'one');
      await moveTreeIn(workspace, 'vendor');
      await session.checkpoint('edited');
      await writeFile(join(workspace, 'notes.txt'), 'not recorded by any checkpoint\n');
      await writeFile(join(workspace, 'src/lib/strings.js'), 'export const pad = 1;\n');
      return {
        argv: ['rollback', 'base'],
        // A file it rewrites, a file inside a directory it removes, one it deletes, removed.
        edits: [typed('src/index.js'), typed('src/one/deep/added.txt'), { path: 'notes.txt' }],
        actionKind: 'rollback',
        probeSession: session.id,
      };
    },
  },
  {
    // Only files written, no deletion first: a kill between a copy and its rename.
    name: 'rollback of some paths',
    budget: 6,
    errorBudget: 6,
    async prepare(workspace) {
      await using session = await openSession({ workspace });
      await session.checkpoint('base');
      await writeFile(join(workspace, 'src/index.js'), 'console.log(2);\n');
      await writeFile(join(workspace, 'README.md'), '# changed\n');
      await writeFile(join(workspace, 'src/lib/strings.js'), 'export const pad = 2;\n');
      return {
        argv: ['rollback', 'base', '--', 'src/index.js', 'README.md'],
        edits: [typed('src/index.js'), typed('src/lib/strings.js')],
        actionKind: 'rollback',
        probeSession: session.id,
      };
    },
  },
  {
    name: 'undo',
    budget: 8,
    errorBudget: 6,
    async prepare(workspace) {
      await using session = await openSession({ workspace });
      await session.checkpoint('base');
      const ran = await session.exec(
        'printf changed > src/index.js && rm -r src/lib && mkdir -p src/gen && printf g > src/gen/out.js && mv docs manual && chmod 600 README.md',
      );
      if (ran.exitCode !== 0) throw new Error(`setup command failed: ${ran.stderr}`);
      await session.checkpoint('after-command');
      return {
        argv: ['undo', String(ran.id)],
        edits: [typed('src/index.js'), typed('src/gen/added.txt'), typed('src/lib/strings.js')],
        actionKind: 'undo',
        probeSession: session.id,
      };
    },
  },
  {
    name: 'commit',
    budget: 8,
    errorBudget: 6,
    async prepare(workspace) {
      const shared = await sessionOf(workspace);
      {
        await using session = await openSession({ workspace });
        await session.checkpoint('base');
      }
      await using isolated = await openSession({ workspace, isolation: 'isolated' });
      await isolated.write('src/index.js', "console.log('isolated');\n");
      await isolated.delete('src/lib/numbers.js');
      await isolated.write('src/feature/a.js', 'export const a = 1;\n');
      const ran = await isolated.exec('mv docs manual && printf new > src/empty.txt');
      if (ran.exitCode !== 0) throw new Error(`setup command failed: ${ran.stderr}`);
      await isolated.checkpoint('in-view');
      await useSession({ workspace, session: isolated.id });
      return {
        argv: ['commit'],
        edits: [typed('src/index.js'), typed('src/feature/added.txt'), typed('README.md')],
        actionKind: 'commit',
        session: isolated.id,
        probeSession: shared,
      };
    },
  },
  {
    name: 'checkpoint',
    budget: 8,
    errorBudget: 6,
    async prepare(workspace) {
      await using session = await openSession({ workspace });
      await session.checkpoint('base');
      await editEverything(workspace, 'two');
      await lay(
        workspace,
        Object.fromEntries(
          Array.from({ length: 12 }, (_, index) => [`generated/part${index}.txt`, `${index}\n`]),
        ),
      );
      return {
        argv: ['checkpoint', 'fresh'],
        edits: [typed('src/index.js'), typed('generated/part3.txt'), { path: 'src/two' }],
        createsCheckpoint: 'fresh',
        probeSession: session.id,
      };
    },
  },
  {
    name: 'gc',
    budget: 8,
    errorBudget: 6,
    async prepare(workspace) {
      await using session = await openSession({ workspace });
      await session.checkpoint('base');
      await editEverything(workspace, 'three');
      await writeFile(join(workspace, 'big-a.bin'), binary(5000, 1));
      // Enough new files for one pack (SPEC §3): gc writes it again without what only a held.
      const generated = Array.from({ length: 20 }, (_, index) => `generated/g${index}.txt`);
      await lay(workspace, Object.fromEntries(generated.map((path) => [path, `${path}\n`])));
      await session.checkpoint('a');
      await rm(join(workspace, 'big-a.bin'));
      await rm(join(workspace, 'generated/g0.txt'));
      await rm(join(workspace, 'generated/g1.txt'));
      await writeFile(join(workspace, 'big-b.bin'), binary(5000, 2));
      await session.checkpoint('b');
      const ran = await session.exec('printf exec > src/index.js && rm big-b.bin');
      await writeFile(join(workspace, 'big-c.bin'), binary(5000, 3));
      await session.checkpoint('c');
      // base and a go: what only they held is garbage for gc.
      await session.prune({ keepLast: 2 });
      return {
        argv: ['gc', '--grace-seconds', '0'],
        // Not src/index.js: the command the probe undoes wrote it, and an edit there (rightly)
        // makes that undo refuse.
        edits: [typed('README.md'), typed('big-a.bin')],
        probeUndo: ran.id,
        probeSession: session.id,
      };
    },
  },
  {
    name: 'exec',
    budget: 8,
    errorBudget: 6,
    async prepare(workspace) {
      await using session = await openSession({ workspace });
      await session.checkpoint('base');
      return {
        argv: ['exec', '--', 'sh', '-c', execScript()],
        edits: [typed('src/index.js'), typed('src/made/added.txt'), { path: 'README.md' }],
        actionKind: 'exec',
        probeSession: session.id,
      };
    },
  },
];

/** The steps of the command the exec scenario runs: each changes the workspace. */
export const EXEC_STEPS = [
  "printf 'console.log(1);\\n' > src/index.js",
  'rm src/lib/numbers.js',
  'mkdir -p src/made/deep && printf m > src/made/deep/m.txt',
  'mv docs manual',
  'chmod 700 scripts/build.sh',
  'rm src/empty.txt && mkdir src/empty.txt',
];

/**
 * The exec scenario's command; with `crashAfter`, it kills Rewind (its parent) and itself after
 * that many steps, as a machine going down midway through the command would.
 */
export function execScript(crashAfter?: number): string {
  const steps = [...EXEC_STEPS];
  if (crashAfter !== undefined) steps.splice(crashAfter, 0, 'kill -9 $PPID; kill -9 0');
  return steps.join(' && ');
}
