/**
 * `rewind hook claude-code`: Claude Code runs it on its hook events (a JSON object on stdin) and
 * Rewind checkpoints the project at the points Claude Code's own rewind misses: before every
 * prompt is worked on (so a turn can be undone whole, shell commands' edits included), before
 * every shell command (Claude Code tracks only its own file edits), and when a session starts.
 */
import { isAbsolute, resolve } from 'node:path';
import type { Command } from 'commander';
import { init, isRewindError } from '../index.js';
import { FIRST_CHECKPOINT_BUDGET } from '../operations/index.js';
import { type CliIo, EXIT_FAILED, EXIT_OK, sessionsOf } from './context.js';
import { outsideTable, readAll } from './options.js';

/** What each hook event checkpoints as: the label's middle part; other events change nothing. */
function checkpointKindOf(event: Record<string, unknown>): string | undefined {
  switch (event.hook_event_name) {
    case 'UserPromptSubmit':
      return 'prompt';
    case 'SessionStart':
      return 'start';
    case 'PreToolUse':
      return event.tool_name === 'Bash' ? 'bash' : undefined;
    default:
      return undefined;
  }
}

/** A label that sorts by time and says why it was taken: `claude-bash-20261201T052241123Z`. */
function labelOf(kind: string, now: Date): string {
  return `claude-${kind}-${now.toISOString().replace(/[-:.]/g, '')}`;
}

/** Where a hook event comes from: what to do when stdin is not one. */
const FROM_CLAUDE_CODE =
  'Claude Code passes one to the hooks in its settings: see the README, "Claude Code".';

/**
 * Handles one hook event: checkpoints the project for the events that call for it. Never blocks
 * Claude Code: a failure is said on stderr (Claude Code shows it to the person) with exit 1, and
 * nothing is ever written on stdout, which Claude Code would add to the model's context.
 */
async function handleEvent(io: CliIo, root: string | undefined): Promise<number> {
  const fail = (message: string): number => {
    io.stderr(`rewind hook claude-code: ${message}\n`);
    return EXIT_FAILED;
  };
  const text = (await readAll(io.stdin)).toString('utf8');
  let event: unknown;
  try {
    event = JSON.parse(text);
  } catch {
    return fail(`stdin is not a hook event (a JSON object). ${FROM_CLAUDE_CODE}`);
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    return fail('stdin is not a hook event: a JSON object was expected.');
  }
  const record = event as Record<string, unknown>;
  if (typeof record.hook_event_name !== 'string') {
    return fail(`stdin is not a hook event: it names no hook_event_name. ${FROM_CLAUDE_CODE}`);
  }
  const kind = checkpointKindOf(record);
  if (kind === undefined) return EXIT_OK;
  // --root is resolved against the current directory, as any path given on the command line;
  // the project Claude Code names ($CLAUDE_PROJECT_DIR, else the event's cwd) must be absolute.
  // Never the directory the hook happens to run in: that could be anywhere, / or /tmp.
  const projectDirectory = io.env?.CLAUDE_PROJECT_DIR || undefined;
  const eventCwd = typeof record.cwd === 'string' && record.cwd !== '' ? record.cwd : undefined;
  const named = projectDirectory ?? eventCwd;
  if (root === undefined && named === undefined) {
    return fail(
      'no project to checkpoint: pass --root DIR, or run it from Claude Code (which sets $CLAUDE_PROJECT_DIR and names the cwd in the event).',
    );
  }
  if (root === undefined && !isAbsolute(named as string)) {
    return fail(
      `no checkpoint taken: the project ${projectDirectory !== undefined ? '$CLAUDE_PROJECT_DIR' : "the event's cwd"} names is not an absolute path (${JSON.stringify(named)}); pass --root DIR.`,
    );
  }
  const workspace = resolve(io.cwd, root ?? (named as string));
  try {
    await init({ workspace });
    const sessions = sessionsOf(io);
    const session = await sessions.open({ workspace });
    try {
      const now = new Date();
      let label = labelOf(kind, now);
      // Parallel tool calls can fire in the same millisecond: the second gets a suffix.
      for (let attempt = 2; ; attempt++) {
        try {
          // The budget `rewind checkpoint` has: a first checkpoint of a huge tree is refused.
          await session.checkpoint(label, { budget: FIRST_CHECKPOINT_BUDGET });
          break;
        } catch (error) {
          if (!isRewindError(error, 'CHECKPOINT_EXISTS') || attempt > 9) throw error;
          label = `${labelOf(kind, now)}-${attempt}`;
        }
      }
    } finally {
      await sessions.release(session);
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const code = isRewindError(error) ? ` [${error.code}]` : '';
    return fail(`no checkpoint taken in ${workspace}: ${message}${code}`);
  }
  return EXIT_OK;
}

/** Adds `rewind hook claude-code`. */
export function addHookCommand(program: Command, io: CliIo, state: { exitCode: number }): void {
  const hook = program
    .command('hook')
    .description(
      "checkpoint the project on an agent's hook events (see `rewind hook claude-code --help`)",
    )
    // An agent it has no hook for (a typo in the settings) is said with exit 1, not as a usage
    // error (2): Claude Code takes exit 2 as blocking the tool call.
    .argument('[agent]')
    .allowUnknownOption()
    .allowExcessArguments()
    .action((agent: string | undefined) => {
      io.stderr(
        `rewind hook: ${agent === undefined ? 'which agent?' : `no hook for ${JSON.stringify(agent)}`}: the hook is \`rewind hook claude-code\` (see \`rewind hook claude-code --help\`).\n`,
      );
      state.exitCode = EXIT_FAILED;
    });
  const claudeCode = hook
    .command('claude-code')
    .description(
      'read a Claude Code hook event (JSON on stdin) and checkpoint the project before each prompt, before each shell command, and when a session starts; never blocks Claude Code',
    )
    // Commander's usage errors exit 2, which Claude Code takes as blocking the tool call: the
    // command takes what it is given, and says what is wrong with it itself (exit 1).
    .allowUnknownOption()
    .allowExcessArguments()
    .option(
      '--root [dir]',
      'the project, relative to the current directory (default: $CLAUDE_PROJECT_DIR, else the cwd the event names; either must be absolute)',
    )
    .action(async (flags: { root?: string | true }, command: Command) => {
      const wrong =
        command.args.length > 0
          ? `unknown option or argument ${JSON.stringify(command.args[0])}`
          : flags.root === true
            ? '--root needs a directory'
            : undefined;
      if (wrong !== undefined) {
        io.stderr(
          `rewind hook claude-code: ${wrong}; it takes only --root DIR (see \`rewind hook claude-code --help\`).\n`,
        );
        state.exitCode = EXIT_FAILED;
        return;
      }
      state.exitCode = await handleEvent(io, flags.root as string | undefined);
    });
  outsideTable(hook, "a group of agents' hooks, not an operation");
  outsideTable(
    claudeCode,
    "Claude Code's hook protocol: an edge of its own that takes checkpoints, not an operation",
  );
}
