/** The `rewind` command line: the program built from the operation table, and its exit codes. */
import { Command, CommanderError, Help, Option } from 'commander';
import { displayPath, REWIND_VERSION } from '../index.js';
import { registerActionCommands } from './commands/actions.js';
import { registerApprovalCommands } from './commands/approval.js';
import { registerConversationCommands } from './commands/conversation.js';
import { registerFileCommands } from './commands/files.js';
import { registerHistoryCommands } from './commands/history.js';
import { registerIsolationCommands } from './commands/isolation.js';
import { registerStoreCommands } from './commands/store.js';
import { registerVerificationCommands } from './commands/verification.js';
import { type CliIo, createCliContext, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './context.js';
import { addDaemonCommand } from './daemon.js';
import { describeError, errorDocument, UsageError, usageDocument } from './errors.js';
import { LISTED_AT_MOST } from './format.js';
import { addHookCommand } from './hook.js';
import { giveChoices, outsideTable, repeatable } from './options.js';

export type { CliIo } from './context.js';

/**
 * Builds the `rewind` command tree: one command per operation of the table (`conversation-sync`
 * is `conversation sync`). Commands report through `io` and set `state.exitCode`.
 */
export function createProgram(io: CliIo, state = { exitCode: EXIT_OK }): Command {
  const program = new Command('rewind')
    .description('Checkpoints, an action ledger and undo for AI agents.')
    .version(REWIND_VERSION, '-V, --version')
    .option(
      '--dir <dir>',
      'workspace directory (default: nearest ancestor holding .rewind/, else the current directory)',
    )
    .option('--json', 'print one JSON document on stdout, nothing else')
    .option(
      '-q, --quiet',
      "print only errors and the output asked for (a listing, a plan, a command's output), no summaries",
    )
    .option(
      '--verbose',
      `list every path, conflict, problem and object in full (else the first ${LISTED_AT_MOST} and a count)`,
    )
    .option('--debug', 'add stack traces and cause chains to errors')
    .option(
      '--redact',
      'strip credentials (Authorization, Cookie, X-Api-Key... headers; URL passwords) before anything is stored; the session keeps it',
    )
    .addOption(
      repeatable(
        new Option(
          '--redact-pattern <re>',
          'strip every match of this regular expression from what is stored (repeatable); the session keeps it',
        ),
      ),
    )
    .option(
      '--block-private',
      'refuse HTTP requests to loopback and private addresses too; the session keeps it',
    )
    .showHelpAfterError('(run `rewind --help` for usage)')
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    // A command's choices come from its operation's schema, made only for the command whose help
    // is shown or that is about to parse its arguments (the hooks below): see giveChoices.
    .configureHelp({
      visibleArguments(command) {
        giveChoices(command);
        return Help.prototype.visibleArguments.call(this, command);
      },
      visibleOptions(command) {
        giveChoices(command);
        return Help.prototype.visibleOptions.call(this, command);
      },
    });
  const cli = createCliContext(io, state);
  registerStoreCommands(program, cli);
  registerHistoryCommands(program, cli);
  registerConversationCommands(program, cli);
  registerFileCommands(program, cli);
  registerActionCommands(program, cli);
  registerApprovalCommands(program, cli);
  registerIsolationCommands(program, cli);
  registerVerificationCommands(program, cli);
  addMcpCommand(program);
  addUiCommand(program);
  addHookCommand(program, io, state);
  addDaemonCommand(program, io, state, runCli);
  const beforeSubcommands = (command: Command): void => {
    if (command.commands.length === 0) return;
    command.hook('preSubcommand', (_command, subcommand) => giveChoices(subcommand));
    for (const subcommand of command.commands) beforeSubcommands(subcommand);
  };
  beforeSubcommands(program);
  return program;
}

/**
 * `rewind mcp`, listed with the other commands. {@link runCli} hands `mcp` and `help mcp` to the
 * server before parsing, since the server has options of its own (`--redact` among them); this
 * command is reached only when global options come first, which the server would not see.
 */
function addMcpCommand(program: Command): void {
  const mcp = program
    .command('mcp')
    .description(
      "serve Rewind's tools to an agent over MCP: stdio, or HTTP with --http (see `rewind mcp --help`)",
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(() => {
      throw new UsageError(
        "The MCP server takes only its own options, after `mcp` (`rewind mcp --root DIR`); rewind's global options do not apply to it.",
      );
    });
  outsideTable(mcp, 'the MCP server: an edge of its own, with its own options, not an operation');
}

/** `rewind ui`, listed with the other commands; {@link runCli} hands it to the web UI's server. */
function addUiCommand(program: Command): void {
  const ui = program
    .command('ui')
    .description(
      'serve a local web timeline of the sessions, to see, compare, approve and undo (see `rewind ui --help`)',
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(() => {
      throw new UsageError(
        "The web UI takes only its own options, after `ui` (`rewind ui --port 8080`); rewind's global options do not apply to it.",
      );
    });
  outsideTable(ui, 'the web UI: an edge of its own, with its own options, not an operation');
}

/**
 * Runs the `rewind` command line with `argv` (without the node and script paths) and returns the
 * exit code: 0 ok, 1 a refused or failed operation, 2 a usage error, 3 an unknown verdict.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  if (argv[0] === 'ui' || (argv[0] === 'help' && argv[1] === 'ui' && argv.length === 2)) {
    if (!io.serveUi) {
      io.stderr('rewind: the web UI cannot run here; run the `rewind` command itself.\n');
      return EXIT_FAILED;
    }
    return io.serveUi(argv[0] === 'ui' ? argv.slice(1) : ['--help']);
  }
  if (argv[0] === 'mcp' || (argv[0] === 'help' && argv[1] === 'mcp' && argv.length === 2)) {
    if (!io.serveMcp) {
      io.stderr('rewind: the MCP server cannot run here; run the `rewind` command itself.\n');
      return EXIT_FAILED;
    }
    return io.serveMcp(argv[0] === 'mcp' ? argv.slice(1) : ['--help']);
  }
  const state = { exitCode: EXIT_OK };
  const program = createProgram(io, state);
  const isJson = argv.includes('--json');
  const isDebug = argv.includes('--debug');
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return state.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version')
        return EXIT_OK;
      if (error.code === 'commander.executeSubCommandAsync' || error.exitCode === 0) return EXIT_OK;
      // Commander has already explained the mistake on stderr; --json still gets its document.
      if (isJson) {
        const message = error.message.replace(/^error: /, '');
        io.stdout(`${JSON.stringify(usageDocument(message), null, 2)}\n`);
      }
      return EXIT_USAGE;
    }
    if (error instanceof UsageError) {
      if (isJson) io.stdout(`${JSON.stringify(usageDocument(error.message), null, 2)}\n`);
      io.stderr(`rewind: ${error.message}\n(run \`rewind --help\` for usage)\n`);
      return EXIT_USAGE;
    }
    if (isJson) io.stdout(`${JSON.stringify(errorDocument(error), null, 2)}\n`);
    io.stderr(displayPath(describeError(error, isDebug)));
    return EXIT_FAILED;
  }
}
