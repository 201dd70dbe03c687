/** `write`, `delete`, `move`, `mkdir` (journaled, undoable), and the plain reads `read`, `list`. */
import { Argument, type Command, Option } from 'commander';
import {
  deleteOperation,
  listOperation,
  mkdirOperation,
  moveOperation,
  readOperation,
  writeOperation,
} from '../../operations/index.js';
import type { CliContext } from '../context.js';
import { commandFor, feed, readAll } from '../options.js';
import { ACTION_PRESENTER } from './actions.js';

/** Registers `write`, `delete` (`rm`), `move` (`mv`), `mkdir`, `read` and `list`. */
export function registerFileCommands(program: Command, cli: CliContext): void {
  const write = commandFor(program, writeOperation);
  feed(write, 'path', new Argument('<path>', 'the file, relative to the workspace root'));
  feed(
    write,
    'content',
    new Argument('[content]', 'the text to write, or - to read standard input (the default)'),
  );
  feed(
    write,
    'encoding',
    new Option(
      '--encoding <encoding>',
      'how the content is encoded: utf8 (default), or base64 (standard input is taken byte for byte otherwise)',
    ),
  );
  write.action(
    async (
      path: string,
      content: string | undefined,
      flags: { encoding?: string },
      command: Command,
    ) => {
      const isStdin = content === undefined || content === '-';
      const bytes = isStdin ? await readAll(cli.io.stdin) : undefined;
      // Standard input is written byte for byte (as base64), unless it says it is base64 already.
      const given = bytes
        ? {
            content: bytes.toString(flags.encoding === 'base64' ? 'utf8' : 'base64'),
            encoding: 'base64',
          }
        : { content, encoding: flags.encoding };
      await cli.perform(command, writeOperation, { path, ...given }, ACTION_PRESENTER);
    },
  );

  const remove = commandFor(program, deleteOperation).alias('rm');
  feed(remove, 'path', new Argument('<path>', 'relative to the workspace root'));
  remove.action((path: string, _flags: object, command: Command) =>
    cli.perform(command, deleteOperation, { path }, ACTION_PRESENTER),
  );

  const move = commandFor(program, moveOperation).alias('mv');
  feed(move, 'from', new Argument('<from>', 'relative to the workspace root'));
  feed(
    move,
    'to',
    new Argument(
      '<to>',
      'relative to the workspace root; must be free (or a file, when moving a file)',
    ),
  );
  move.action((from: string, to: string, _flags: object, command: Command) =>
    cli.perform(command, moveOperation, { from, to }, ACTION_PRESENTER),
  );

  const mkdir = commandFor(program, mkdirOperation);
  feed(mkdir, 'path', new Argument('<path>', 'relative to the workspace root'));
  mkdir.action((path: string, _flags: object, command: Command) =>
    cli.perform(command, mkdirOperation, { path }, ACTION_PRESENTER),
  );

  const read = commandFor(program, readOperation);
  feed(read, 'path', new Argument('<path>', 'the file, relative to the workspace root'));
  read.action((path: string, _flags: object, command: Command) =>
    cli.perform(
      command,
      readOperation,
      { path },
      { text: (content) => content, json: (content) => ({ path, content }) },
    ),
  );

  const list = commandFor(program, listOperation);
  feed(
    list,
    'path',
    new Argument('[path]', 'the directory, relative to the workspace root (default: .)'),
  );
  list.action((path: string | undefined, _flags: object, command: Command) =>
    cli.perform(
      command,
      listOperation,
      { path },
      {
        text: (entries) => entries.map((entry) => `${entry}\n`).join(''),
        json: (entries) => ({ path: path ?? '.', entries }),
      },
    ),
  );
}
