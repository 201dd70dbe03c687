import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isRewindError } from '../../src/errors.js';
import { init, openSession } from '../../src/session/index.js';
import { createObjectStore } from '../../src/store/index.js';
import { rewind } from '../helpers/cli.js';
import { git } from '../helpers/git.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

/** Every file under `root` but `.git/` and `.rewind/`, with its content. */
async function filesUnder(root: string, relative = ''): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const entry of await readdir(join(root, relative), { withFileTypes: true })) {
    if (relative === '' && (entry.name === '.git' || entry.name === '.rewind')) continue;
    const path = relative === '' ? entry.name : `${relative}/${entry.name}`;
    if (entry.isDirectory()) {
      for (const [inner, content] of await filesUnder(root, path)) files.set(inner, content);
    } else {
      files.set(path, await readFile(join(root, path), 'utf8'));
    }
  }
  return files;
}

/**
 * Which of `paths` the ignore files of `files` (a workspace's content) leave out, by git itself:
 * a scratch repository gets, in each directory, its `.gitignore` followed by its `.rewindignore`
 * (Rewind's rules come after git's, so they win at the same level), and `git check-ignore` judges.
 */
async function ignoredBy(
  files: ReadonlyMap<string, string>,
  paths: string[],
): Promise<Set<string>> {
  const scratch = await makeTempDirectory('rewind-oracle-');
  git(scratch, ['init', '-q']);
  const texts = new Map<string, { git: string; rewind: string }>();
  for (const [path, content] of files) {
    const name = path.split('/').at(-1);
    if (name !== '.gitignore' && name !== '.rewindignore') continue;
    const directory = dirname(path);
    const known = texts.get(directory) ?? { git: '', rewind: '' };
    if (name === '.gitignore') known.git = content;
    else known.rewind = content;
    texts.set(directory, known);
  }
  for (const [directory, text] of texts) {
    await mkdir(join(scratch, directory), { recursive: true });
    await writeFile(join(scratch, directory, '.gitignore'), `${text.git}\n${text.rewind}`);
  }
  if (paths.length === 0) return new Set();
  let output = '';
  try {
    output = git(scratch, ['check-ignore', '--no-index', '--stdin', '-z'], paths.join('\0'));
  } catch (error) {
    // Exit 1: none of them is ignored.
    output = String((error as { stdout?: string }).stdout ?? '');
  }
  return new Set(output.split('\0').filter(Boolean));
}

describe('rules that change between checkpoints', () => {
  it('never lose a file: the newcomer repro with .rewindignore, rolled back both ways and undone', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, { 'a.txt': 'a', '.env': 'SECRET=1\n' });
    expect((await rewind(cwd, ['init', '-q'])).code).toBe(0);
    expect((await rewind(cwd, ['checkpoint', 'c1'])).code).toBe(0);
    await writeFile(join(cwd, '.rewindignore'), '.env\n');
    expect((await rewind(cwd, ['checkpoint', 'c2'])).code).toBe(0);
    expect((await rewind(cwd, ['rollback', 'c1'])).code).toBe(0);
    expect(await readFile(join(cwd, '.env'), 'utf8')).toBe('SECRET=1\n');
    expect((await rewind(cwd, ['rollback', 'c2'])).code).toBe(0);
    expect(await readFile(join(cwd, '.env'), 'utf8')).toBe('SECRET=1\n');
    expect((await rewind(cwd, ['undo', '--last'])).code).toBe(0);
    expect(await readFile(join(cwd, '.env'), 'utf8')).toBe('SECRET=1\n');
  });

  it('reports a file a command replaced by a folder (or an ignored one) as deleted, with no warning', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'a', build: 'a file', '.rewindignore': 'build/\n' });
    await init({ workspace });
    const session = await openSession({ workspace });
    try {
      const replaced = await session.exec('rm a.txt && mkdir a.txt && echo hi > a.txt/x');
      expect(replaced).toMatchObject({ created: ['a.txt/x'], modified: [], deleted: ['a.txt'] });
      expect(replaced.warnings).toEqual([]);
      // A folder the rules leave out, where a file was: the file is gone all the same.
      const ignored = await session.exec('rm build && mkdir build && echo out > build/y');
      expect(ignored).toMatchObject({ created: [], modified: [], deleted: ['build'] });
      expect(ignored.warnings).toEqual([]);
      // Its undo puts the file back once the folder (whose files Rewind does not track) is gone.
      await rm(join(workspace, 'build'), { recursive: true });
      await session.undo(ignored.id);
      expect(await readFile(join(workspace, 'build'), 'utf8')).toBe('a file');
    } finally {
      await session.close();
    }
  });

  it('cannot hide a deletion: an agent that writes a rule first and then deletes gets it all back', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'src/a.ts': 'a', 'src/lib/b.ts': 'b', 'README.md': 'r' });
    await init({ workspace });
    const session = await openSession({ workspace });
    try {
      await session.checkpoint('base');
      const rule = await session.exec('echo src > .rewindignore');
      expect(rule.deleted).toEqual([]);
      expect(rule.warnings).toEqual([
        expect.stringMatching(/^src\/a\.ts, src\/lib\/b\.ts are still there but now left out/),
      ]);
      const removal = await session.exec('rm -rf src');
      expect(removal.deleted).toEqual([]); // left out by then: nothing recorded
      // Undoing the rule brings back what it hid and the deletion took.
      await session.undo(rule.id);
      expect(existsSync(join(workspace, '.rewindignore'))).toBe(false);
      expect(await readFile(join(workspace, 'src/lib/b.ts'), 'utf8')).toBe('b');
      // And so does a rollback, with the rule still there.
      await session.exec('echo src > .rewindignore && rm -rf src');
      await session.rollback('base');
      expect(await readFile(join(workspace, 'src/a.ts'), 'utf8')).toBe('a');
      expect(await readFile(join(workspace, 'src/lib/b.ts'), 'utf8')).toBe('b');
      // What is there and left out is still never overwritten.
      await session.exec('echo src > .rewindignore && echo mine > src/a.ts');
      await session.rollback('base');
      expect(await readFile(join(workspace, 'src/a.ts'), 'utf8')).toBe('mine\n');
    } finally {
      await session.close();
    }
  });

  it('a rule that leaves out everything cannot hide itself: undo and rollback take it back', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'src/a.ts': 'a', 'README.md': 'r', 'sub/.gitignore': '*\n' });
    await init({ workspace });
    const session = await openSession({ workspace });
    try {
      await session.checkpoint('base');
      const ran = await session.exec("printf '*\\n' > .rewindignore && rm -rf src README.md");
      expect(ran.created).toEqual(['.rewindignore']);
      expect(ran.deleted.sort()).toEqual(['README.md', 'src/a.ts']);
      await session.undo(ran.id);
      expect(existsSync(join(workspace, '.rewindignore'))).toBe(false);
      expect(await readFile(join(workspace, 'src/a.ts'), 'utf8')).toBe('a');
      await session.exec("printf '*\\n' > .rewindignore && rm -rf src sub/.gitignore");
      await session.rollback('base');
      expect(existsSync(join(workspace, '.rewindignore'))).toBe(false);
      expect(await readFile(join(workspace, 'src/a.ts'), 'utf8')).toBe('a');
      // A rule file that leaves out its own directory is kept too.
      expect(await readFile(join(workspace, 'sub/.gitignore'), 'utf8')).toBe('*\n');
    } finally {
      await session.close();
    }
  });

  it('a dry run lists what the rollback would leave alone, not as deleted (rules changed since the checkpoint)', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, {
      '.gitignore': 'node_modules\ndist\n.env\n',
      '.env': 'SECRET=1\n',
      'dist/o.js': 'built\n',
      'src/a.js': 'a\n',
    });
    await init({ workspace });
    const session = await openSession({ workspace });
    try {
      await session.checkpoint('ign1');
      // The rules change: .env and dist are recorded by the next checkpoint.
      await writeFile(join(workspace, '.gitignore'), 'node_modules\n');
      await session.checkpoint('ign2');
      await writeFile(join(workspace, '.env'), 'SECRET=2\n');
      const plan = await session.rollback('ign1', { dryRun: true });
      expect(plan.changes.map((change) => [change.action, change.path])).toEqual([
        ['written', '.gitignore'],
      ]);
      expect(plan.leftAlone?.sort()).toEqual(['.env', 'dist', 'dist/o.js']);
      const done = await session.rollback('ign1');
      expect(done.applied?.skipped.sort()).toEqual(['.env', 'dist', 'dist/o.js']);
      expect(await readFile(join(workspace, '.env'), 'utf8')).toBe('SECRET=2\n');
      // Back the other way, what the workspace's rules leave out now is left alone too.
      const cli = await rewind(workspace, ['rollback', 'ign2', '--dry-run']);
      expect(cli.stdout).toBe(
        'Rolling back to ign2 would change 1 path:\n  written  .gitignore\n' +
          'It would leave alone (ignored): .env, dist, dist/o.js.\n',
      );
    } finally {
      await session.close();
    }
  });

  it('a dry run leaves a directory to remove alone when what the rules leave out stays in it', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { '.gitignore': '*.log\n', 'a.txt': 'a\n' });
    await init({ workspace });
    const session = await openSession({ workspace });
    try {
      await session.checkpoint('before');
      await lay(workspace, { 'gen/keep.txt': 'kept\n', 'gen/run.log': 'ignored\n' });
      await session.checkpoint('after');
      const plan = await session.rollback('before', { dryRun: true });
      expect(plan.changes.map((change) => [change.action, change.path])).toEqual([
        ['deleted', 'gen/keep.txt'],
      ]);
      expect(plan.leftAlone).toEqual(['gen']);
      const done = await session.rollback('before');
      expect(done.applied?.skipped).toEqual(['gen']);
      expect(await readdir(join(workspace, 'gen'))).toEqual(['run.log']);
    } finally {
      await session.close();
    }
  });

  it('an undo of a rollback that brought back a path the rules now leave out removes it again', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'a', '.env': 'secret' });
    await init({ workspace });
    const session = await openSession({ workspace });
    try {
      await session.checkpoint('with-env');
      await rm(join(workspace, '.env'));
      await writeFile(join(workspace, '.gitignore'), '.env\n');
      const rollback = await session.rollback('with-env');
      expect(rollback.applied).toMatchObject({ createdLeftOut: ['.env'] });
      expect(await readFile(join(workspace, '.env'), 'utf8')).toBe('secret');
      await session.undo(rollback.id as number);
      expect(existsSync(join(workspace, '.env'))).toBe(false);
      expect(await readFile(join(workspace, '.gitignore'), 'utf8')).toBe('.env\n');
      // Edited since the rollback, it is not removed: the undo refuses.
      const again = await session.rollback('with-env');
      await writeFile(join(workspace, '.env'), 'edited');
      expect((await session.undo(again.id as number)).status).toBe('refused');
      expect(await readFile(join(workspace, '.env'), 'utf8')).toBe('edited');
    } finally {
      await session.close();
    }
  });

  it("leave a git repository's ignored files alone through rollbacks and undos, and keep the secret out of the store", async () => {
    const workspace = await makeTempDirectory();
    git(workspace, ['init', '-q']);
    await lay(workspace, {
      '.gitignore': 'node_modules/\ndist/\n*.log\n.env\n',
      'src/index.js': 'v1',
      'node_modules/dep/index.js': 'dep',
      'dist/app.js': 'built',
      'debug.log': 'log',
      '.env': 'SECRET=abc\n',
    });
    await init({ workspace });
    const session = await openSession({ workspace });
    const first = await session.checkpoint('c1');
    expect(first.fileCount).toBe(2);
    // No object holds the secret git ignores.
    const store = createObjectStore(join(workspace, '.rewind'));
    let objectCount = 0;
    for await (const { digest } of store.list()) {
      objectCount += 1;
      expect((await store.get(digest)).toString('latin1')).not.toContain('SECRET=abc');
    }
    expect(objectCount).toBeGreaterThan(2);
    await writeFile(join(workspace, '.gitignore'), 'node_modules/\n');
    await writeFile(join(workspace, 'src/index.js'), 'v2');
    await session.checkpoint('c2');
    const ignoredBefore = await filesUnder(workspace);
    const back = await session.rollback('c1');
    await session.rollback('c2');
    await session.undo('last');
    await session.undo(back.id as number);
    const after = await filesUnder(workspace);
    for (const path of ['node_modules/dep/index.js', 'dist/app.js', 'debug.log', '.env']) {
      expect(after.get(path), path).toBe(ignoredBefore.get(path));
    }
    await session.close();
  });
  const PATTERNS = ['*.log', '.env', 'dist/', 'sub/', '!keep.log', 'sub/*.tmp', '*.tmp', '!.env'];
  const PATHS = [
    'a.txt',
    'keep.log',
    'x.log',
    '.env',
    'dist/o.js',
    'sub/y.tmp',
    'sub/z.txt',
    'w.tmp',
  ];
  const rules = fc.subarray(PATTERNS, { maxLength: 4 }).map((lines) => `${lines.join('\n')}\n`);
  type Step =
    | { type: 'write'; path: number; text: string }
    | { type: 'delete'; path: number }
    | { type: 'rules'; file: '.gitignore' | '.rewindignore' | 'sub/.gitignore'; text: string }
    | { type: 'checkpoint' }
    | { type: 'rollback'; pick: number; undo: boolean }
    | { type: 'undo-last' };
  const step: fc.Arbitrary<Step> = fc.oneof(
    {
      weight: 2,
      arbitrary: fc.record({
        type: fc.constant('write' as const),
        path: fc.nat({ max: PATHS.length - 1 }),
        text: fc.string({ maxLength: 4 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constant('delete' as const),
        path: fc.nat({ max: PATHS.length - 1 }),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        type: fc.constant('rules' as const),
        file: fc.constantFrom(
          '.gitignore' as const,
          '.rewindignore' as const,
          'sub/.gitignore' as const,
        ),
        text: rules,
      }),
    },
    { weight: 3, arbitrary: fc.constant({ type: 'checkpoint' as const }) },
    {
      weight: 3,
      arbitrary: fc.record({
        type: fc.constant('rollback' as const),
        pick: fc.nat(),
        undo: fc.boolean(),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ type: 'undo-last' as const }) },
  );

  it('touch nothing that either side leaves out, and a rollback undone round-trips every file (random rules, files, rollbacks and undos)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 4, maxLength: 14 }), async (steps) => {
        const workspace = await makeTempDirectory();
        git(workspace, ['init', '-q']);
        await lay(workspace, { 'a.txt': 'a', '.env': 'secret', 'sub/z.txt': 'z' });
        await init({ workspace });
        const session = await openSession({ workspace });
        let labels = 0;
        try {
          for (const current of steps) {
            if (current.type === 'write' || current.type === 'delete') {
              const path = join(workspace, PATHS[current.path] as string);
              if (current.type === 'delete') await rm(path, { force: true });
              else {
                await mkdir(dirname(path), { recursive: true });
                await writeFile(path, current.text);
              }
            } else if (current.type === 'rules') {
              await mkdir(dirname(join(workspace, current.file)), { recursive: true });
              await writeFile(join(workspace, current.file), current.text);
            } else if (current.type === 'checkpoint') {
              await session.checkpoint(`c${++labels}`);
            } else if (current.type === 'rollback') {
              const checkpoints = await session.checkpoints();
              const target = checkpoints[current.pick % Math.max(1, checkpoints.length)];
              if (!target) continue;
              const before = await filesUnder(workspace);
              const paths = [...before.keys()];
              const leftOutBefore = await ignoredBy(before, paths);
              // The dry run tells what the rollback then does: what it changes, what it leaves.
              const plan = await session.rollback(target.label, { dryRun: true });
              const result = await session.rollback(target.label);
              const skipped = result.applied?.skipped ?? [];
              expect(new Set(plan.leftAlone), 'left alone, as the dry run said').toEqual(
                new Set(skipped),
              );
              for (const change of plan.changes) expect(skipped).not.toContain(change.path);
              const after = await filesUnder(workspace);
              const leftOutAfter = await ignoredBy(after, [
                ...new Set([...paths, ...after.keys()]),
              ]);
              for (const path of paths) {
                if (leftOutBefore.has(path) || leftOutAfter.has(path)) {
                  expect(after.get(path), `${path} was left out, yet the rollback touched it`).toBe(
                    before.get(path),
                  );
                }
              }
              for (const path of after.keys()) {
                if (!before.has(path)) {
                  expect(leftOutAfter.has(path), `${path} was created though left out`).toBe(false);
                }
              }
              if (current.undo) {
                await session.undo(result.id as number);
                expect(await filesUnder(workspace)).toEqual(before);
              }
            } else {
              await session.undo('last').catch((error: unknown) => {
                if (!isRewindError(error)) throw error;
              });
            }
          }
        } finally {
          await session.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 120_000);
});

describe('the store', () => {
  it('is left out of git, even by git add -A', async () => {
    const workspace = await makeTempDirectory();
    git(workspace, ['init', '-q']);
    await lay(workspace, { 'a.txt': 'a' });
    await init({ workspace });
    git(workspace, ['add', '-A']);
    expect(git(workspace, ['diff', '--cached', '--name-only'])).toBe('a.txt\n');
    expect(existsSync(join(workspace, '.rewind/.gitignore'))).toBe(true);
  });
});
