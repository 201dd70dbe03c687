/** `conversation sync`, `conversation show`: the agent's conversation, paired with checkpoints. */
import { resolve } from 'node:path';
import { Argument, type Command, Option } from 'commander';
import { conversationShowOperation, conversationSyncOperation } from '../../operations/index.js';
import type { CliContext } from '../context.js';
import { UsageError } from '../errors.js';
import { plural } from '../format.js';
import { commandFor, feed, feedAlternative, readMessages } from '../options.js';

/** The options of `conversation sync`: `--messages` (the file, when FILE does not give it), `--format`. */
interface SyncFlags {
  messages?: string;
  format?: string;
}

/** Registers the `conversation` group: `conversation sync` and `conversation show`. */
export function registerConversationCommands(program: Command, cli: CliContext): void {
  const conversation = program
    .command('conversation')
    .description("record and show the agent's conversation, paired with checkpoints");

  const sync = commandFor(conversation, conversationSyncOperation);
  feed(sync, 'messages', new Argument('[file]', 'a JSON file, or - for standard input'));
  // Spelled as `rewind checkpoint --messages FILE` spells it, too.
  feedAlternative(
    sync,
    'messages',
    new Option(
      '--messages <file>',
      'the same file as an option, as checkpoint takes it (one or the other)',
    ),
  );
  feed(sync, 'format', new Option('--format <format>', 'the message format (default: detected)'));
  sync.action(async (argument: string | undefined, flags: SyncFlags, command: Command) => {
    if (argument !== undefined && flags.messages !== undefined) {
      throw new UsageError(
        `Give the conversation once: FILE (${argument}) or --messages FILE (${flags.messages}), not both.`,
      );
    }
    const file = argument ?? flags.messages;
    if (file === undefined) {
      throw new UsageError(
        'Give the conversation to record: FILE or --messages FILE, a JSON array of messages (- reads standard input).',
      );
    }
    const messages = await readMessages(
      file === '-' ? undefined : resolve(cli.io.cwd, file),
      cli.io.stdin,
    );
    await cli.perform(
      command,
      conversationSyncOperation,
      { messages, format: flags.format },
      {
        text: (output, globals) =>
          globals.quiet
            ? ''
            : output.isChanged
              ? `Recorded the conversation: ${plural(output.messageCount, 'message')} (${output.format}).\n`
              : `The conversation is unchanged (${plural(output.messageCount, 'message')}); nothing recorded.\n`,
      },
    );
  });

  const show = commandFor(conversation, conversationShowOperation);
  feed(show, 'label', new Argument('[label]', 'a checkpoint label, or "latest"'));
  feed(
    show,
    'patchNote',
    new Option('--patch-note <text>', 'the patch note a rollback would pass'),
  );
  show.action((label: string | undefined, flags: { patchNote?: string }, command: Command) =>
    cli.perform(
      command,
      conversationShowOperation,
      { label, patchNote: flags.patchNote },
      // The messages alone are what a program feeds back to its model; --json adds the format.
      { text: (output) => `${JSON.stringify(output.messages, null, 2)}\n` },
    ),
  );
}
