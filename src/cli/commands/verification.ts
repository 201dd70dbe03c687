/** `test`: the session's verifier, its verdict in words and as the exit code. */
import { type Command, Option } from 'commander';
import { formatVerification } from '../../index.js';
import { testOperation } from '../../operations/index.js';
import { type CliContext, EXIT_FAILED, EXIT_OK, EXIT_UNKNOWN } from '../context.js';
import { commandFor, feed, numberOf } from '../options.js';

interface TestFlags {
  verifier?: string;
  retries?: string;
  timeout?: string;
}

/** Registers `test`. */
export function registerVerificationCommands(program: Command, cli: CliContext): void {
  const test = commandFor(program, testOperation);
  feed(
    test,
    'verifier',
    new Option(
      '--verifier <command>',
      'the verifier command (default: .rewind/config.json "verifier")',
    ),
  );
  feed(
    test,
    'retries',
    new Option('--retries <n>', 'retry an unknown verdict this many times (default: 0)'),
  );
  feed(
    test,
    'timeout',
    new Option(
      '--timeout <seconds>',
      'end the verifier after this; counts as unknown (default: 600)',
    ),
  );
  test.action((flags: TestFlags, command: Command) =>
    cli.perform(
      command,
      testOperation,
      {
        verifier: flags.verifier,
        retries: numberOf(flags.retries),
        timeout: numberOf(flags.timeout),
      },
      {
        // A pass is a summary, which --quiet leaves to the exit code; a fail or unknown says why.
        text: (output, globals) =>
          globals.quiet && output.status === 'pass'
            ? ''
            : `${output.status.toUpperCase()}: ${formatVerification(output)}\n`,
        exitCode: (output) =>
          output.status === 'pass'
            ? EXIT_OK
            : output.status === 'fail'
              ? EXIT_FAILED
              : EXIT_UNKNOWN,
      },
    ),
  );
}
