/**
 * `rewind hook claude-code`: Claude Code runs it on its hook events (a JSON object on stdin) and
 * Rewind checkpoints the project at the points Claude Code's own rewind misses: before every
 * prompt is worked on (so a turn can be undone whole, shell commands' edits included), before
 * every shell command (Claude Code tracks only its own file edits), and when a session starts.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { init, isRewindError } from '../index.js';
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
    return fail(
      'stdin is not a hook event (a JSON object). Claude Code passes one to the hooks in its settings: see the README, "Claude Code".',
    );
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    return fail('stdin is not a hook event: a JSON object was expected.');
  }
  const record = event as Record<string, unknown>;
  const kind = checkpointKindOf(record);
  if (kind === undefined) return EXIT_OK;
  const projectDirectory = io.env?.CLAUDE_PROJECT_DIR;
  const workspace = resolve(
    io.cwd,
    root ??
      (projectDirectory ||
        (typeof record.cwd === 'string' && record.cwd !== '' ? record.cwd : io.cwd)),
  );
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
          await session.checkpoint(label);
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
    );
  const claudeCode = hook
    .command('claude-code')
    .description(
      'read a Claude Code hook event (JSON on stdin) and checkpoint the project before each prompt, before each shell command, and when a session starts; never blocks Claude Code',
    )
    .option(
      '--root <dir>',
      'the project (default: $CLAUDE_PROJECT_DIR, else the cwd the event names, else the current directory)',
    )
    .action(async (flags: { root?: string }) => {
      state.exitCode = await handleEvent(io, flags.root);
    });
  outsideTable(hook, "a group of agents' hooks, not an operation");
  outsideTable(
    claudeCode,
    "Claude Code's hook protocol: an edge of its own that takes checkpoints, not an operation",
  );
}
