import { execFileSync } from 'node:child_process';
import { readdir, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

/** A hook event as Claude Code sends it on stdin. */
const event = (cwd: string, fields: Record<string, unknown>) =>
  JSON.stringify({
    session_id: '8c35adc1-5d5e-4b0e-9a51-1f6e3c1f2b7a',
    transcript_path: '/home/someone/.claude/projects/x/8c35adc1.jsonl',
    cwd,
    permission_mode: 'default',
    ...fields,
  });

const labels = async (cwd: string): Promise<string[]> =>
  JSON.parse((await rewind(cwd, ['checkpoints', '--json'])).stdout).checkpoints.map(
    (checkpoint: { label: string }) => checkpoint.label,
  );

describe('rewind hook claude-code', () => {
  it("checkpoints before each prompt and each shell command, so a person can undo what Claude Code's own rewind misses", async () => {
    const project = await makeTempDirectory();
    await lay(project, {
      '.gitignore': 'node_modules/\n',
      'src/app.js': 'v1\n',
      'node_modules/x.js': 'x',
    });
    execFileSync('git', ['init', '-q'], { cwd: project });
    const elsewhere = await makeTempDirectory();
    const env = { CLAUDE_PROJECT_DIR: project };
    // Claude Code runs the hook from wherever it is: the project comes from its variable.
    const started = await rewind(elsewhere, ['hook', 'claude-code'], {
      stdin: event(project, { hook_event_name: 'SessionStart', source: 'startup' }),
      env,
    });
    expect(started).toEqual({ code: 0, stdout: '', stderr: '' });
    const prompt = await rewind(elsewhere, ['hook', 'claude-code'], {
      stdin: event(project, { hook_event_name: 'UserPromptSubmit', prompt: 'refactor the app' }),
      env,
    });
    expect(prompt).toEqual({ code: 0, stdout: '', stderr: '' });
    // Edits through Claude Code's own tools are not what this hook is for; shell commands are.
    const write = await rewind(elsewhere, ['hook', 'claude-code'], {
      stdin: event(project, {
        hook_event_name: 'PreToolUse',
        tool_name: 'Write',
        tool_input: { file_path: join(project, 'src/app.js'), content: 'v2\n' },
      }),
      env,
    });
    expect(write.code).toBe(0);
    await writeFile(join(project, 'src/app.js'), 'v2\n');
    const bash = await rewind(elsewhere, ['hook', 'claude-code'], {
      stdin: event(project, {
        hook_event_name: 'PreToolUse',
        tool_name: 'Bash',
        tool_input: { command: "sed -i 's/v2/broken/' src/app.js && rm -f .gitignore" },
      }),
      env,
    });
    expect(bash).toEqual({ code: 0, stdout: '', stderr: '' });
    // What the shell command did, which Claude Code cannot take back.
    await writeFile(join(project, 'src/app.js'), 'broken\n');
    const after = await rewind(elsewhere, ['hook', 'claude-code'], {
      stdin: event(project, { hook_event_name: 'PostToolUse', tool_name: 'Bash' }),
      env,
    });
    expect(after.code).toBe(0);

    const taken = await labels(project);
    expect(taken).toEqual([
      expect.stringMatching(/^claude-start-\d{8}T\d{9}Z$/),
      expect.stringMatching(/^claude-prompt-/),
      expect.stringMatching(/^claude-bash-/),
    ]);
    // Before the shell command: v2, as Claude Code's Write left it.
    expect((await rewind(project, ['rollback', taken[2] as string])).code).toBe(0);
    expect(await readFile(join(project, 'src/app.js'), 'utf8')).toBe('v2\n');
    // Before the prompt: the whole turn undone.
    expect((await rewind(project, ['rollback', taken[1] as string])).code).toBe(0);
    expect(await readFile(join(project, 'src/app.js'), 'utf8')).toBe('v1\n');
  });

  it('takes the project from --root or the event, labels parallel calls apart, and never blocks Claude Code', async () => {
    const project = await makeTempDirectory();
    await lay(project, { 'a.txt': 'a' });
    const bash = event(project, { hook_event_name: 'PreToolUse', tool_name: 'Bash' });
    const calls = await Promise.all(
      [1, 2, 3].map(() => rewind(project, ['hook', 'claude-code'], { stdin: bash })),
    );
    expect(calls.map((call) => call.code)).toEqual([0, 0, 0]);
    expect(new Set(await labels(project)).size).toBe(3);

    const other = await makeTempDirectory();
    const rooted = await rewind(project, ['hook', 'claude-code', '--root', other], {
      stdin: event(project, { hook_event_name: 'UserPromptSubmit', prompt: 'x' }),
    });
    expect(rooted.code).toBe(0);
    expect(await labels(other)).toHaveLength(1);

    // A failure is said to the person (exit 1), never exit 2, which would block the tool call.
    const garbage = await rewind(project, ['hook', 'claude-code'], { stdin: 'not json' });
    expect(garbage.code).toBe(1);
    expect(garbage.stdout).toBe('');
    expect(garbage.stderr).toContain('stdin is not a hook event');
    const notOurs = await makeTempDirectory();
    await lay(notOurs, { '.rewind': 'a file, not a store' });
    const refused = await rewind(notOurs, ['hook', 'claude-code'], {
      stdin: event(notOurs, { hook_event_name: 'UserPromptSubmit', prompt: 'x' }),
    });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/no checkpoint taken in .*\[STORE_NOT_OURS\]/);
  });

  it('refuses an event that names no absolute project, and keeps the first-checkpoint budget of `rewind checkpoint`', async () => {
    const here = await makeTempDirectory();
    await lay(here, { 'a.txt': 'a' });
    const prompt = { hook_event_name: 'UserPromptSubmit', prompt: 'x' };
    // No --root, no $CLAUDE_PROJECT_DIR, no cwd: never the directory the hook runs in.
    const nowhere = await rewind(here, ['hook', 'claude-code'], {
      stdin: JSON.stringify(prompt),
      env: {},
    });
    expect(nowhere.code).toBe(1);
    expect(nowhere.stdout).toBe('');
    expect(nowhere.stderr).toContain('no project to checkpoint: pass --root DIR');
    const relative = await rewind(here, ['hook', 'claude-code'], {
      stdin: event('.', prompt),
      env: {},
    });
    expect(relative.code).toBe(1);
    expect(relative.stderr).toContain('is not an absolute path');
    expect(await readdir(here)).toEqual(['a.txt']);
    // --root is a path on the command line: relative to the current directory.
    const rooted = await rewind(here, ['hook', 'claude-code', '--root', '.'], {
      stdin: JSON.stringify(prompt),
      env: {},
    });
    expect(rooted).toEqual({ code: 0, stdout: '', stderr: '' });
    expect(await labels(here)).toHaveLength(1);

    // Over 1 GiB (a sparse file costs nothing): refused as `rewind checkpoint` refuses it.
    const huge = await makeTempDirectory();
    await writeFile(join(huge, 'big.bin'), '');
    await truncate(join(huge, 'big.bin'), 1024 ** 3 + 1);
    const over = await rewind(here, ['hook', 'claude-code'], {
      stdin: event(huge, { hook_event_name: 'SessionStart', source: 'startup' }),
      env: {},
    });
    expect(over.code).toBe(1);
    expect(over.stdout).toBe('');
    expect(over.stderr).toMatch(/no checkpoint taken in .*\[SNAPSHOT_TOO_LARGE\]/);
    expect(await labels(huge)).toEqual([]);
  });

  it('says a mistake in its own command line on stderr with exit 1, never the usage exit 2, which would block the tool call', async () => {
    const project = await makeTempDirectory();
    const stdin = event(project, { hook_event_name: 'UserPromptSubmit', prompt: 'x' });
    for (const [args, said] of [
      [['--bogus'], 'unknown option or argument "--bogus"'],
      [['extra'], 'unknown option or argument "extra"'],
      [['--root'], '--root needs a directory'],
    ] as const) {
      const run = await rewind(project, ['hook', 'claude-code', ...args], { stdin });
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(said);
    }
    // An agent it has no hook for (a typo in the settings), none, or an event naming no event.
    for (const [args, input, said] of [
      [
        ['hook', 'claude'],
        stdin,
        'rewind hook: no hook for "claude": the hook is `rewind hook claude-code`',
      ],
      [['hook'], stdin, 'rewind hook: which agent?'],
      [
        ['hook', 'claude-code'],
        JSON.stringify({ cwd: project }),
        'it names no hook_event_name. Claude Code passes one to the hooks in its settings: see the README, "Claude Code".',
      ],
    ] as const) {
      const run = await rewind(project, [...args], { stdin: input });
      expect(run).toMatchObject({ code: 1, stdout: '' });
      expect(run.stderr).toContain(said);
    }
    expect(await readdir(project)).toEqual([]);
  });
});
