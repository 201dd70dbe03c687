/**
 * The options every command shares, declared once, and the registry that says which input of its
 * operation each argument and option of a command feeds (the drift test reads it).
 */
import { readFile } from 'node:fs/promises';
import { type Argument, type Command, Option } from 'commander';
import { RewindError } from '../index.js';
import { type AnyOperation, choicesOf } from '../operations/index.js';
import { UsageError } from './errors.js';

/** An argument or an option of a command. */
export type CommandInput = Argument | Option;

/** Which input key each argument and option of a command feeds, and those that feed none. */
export interface CommandInputs {
  readonly operation: AnyOperation;
  /** The argument or option that feeds each input key. */
  readonly feeders: ReadonlyMap<string, CommandInput>;
  /** Other spellings of a feeder (`--messages FILE` beside `FILE`), with the key each feeds. */
  readonly alternatives: ReadonlyMap<CommandInput, string>;
  /** Arguments and options of the command line alone (presentation, prompts), with why. */
  readonly cliOnly: ReadonlyMap<CommandInput, string>;
}

const REGISTRY = new WeakMap<
  Command,
  {
    operation: AnyOperation;
    feeders: Map<string, CommandInput>;
    alternatives: Map<CommandInput, string>;
    cliOnly: Map<CommandInput, string>;
  }
>();

const OUTSIDE_TABLE = new WeakMap<Command, string>();

/** Marks `command` as built from no operation of the table, saying why (the drift test reads it). */
export function outsideTable(command: Command, reason: string): Command {
  OUTSIDE_TABLE.set(command, reason);
  return command;
}

/** Why `command` is built from no operation; undefined for a command of the table. */
export function whyOutsideTable(command: Command): string | undefined {
  return OUTSIDE_TABLE.get(command);
}

/** What {@link commandFor} recorded about `command`; undefined for a command built from no operation. */
export function inputsOf(command: Command): CommandInputs | undefined {
  return REGISTRY.get(command);
}

/** The option that names the session a command works in, declared once for every command. */
export function sessionOption(): Option {
  return new Option('--session <id>', 'the session (default: the current one)');
}

/** The session `--session` named, if any. */
export function sessionOf(command: Command): string | undefined {
  const value: unknown = command.getOptionValue('session');
  return typeof value === 'string' ? value : undefined;
}

/**
 * The command of `operation` under `parent`: named by the operation (`conversation-sync` under
 * `conversation` is `sync`), described by its summary, with `--session` when it works in a session.
 * Throws when the name does not belong under `parent`: a mistake in the CLI's code.
 */
export function commandFor(parent: Command, operation: AnyOperation): Command {
  const prefix = parent.parent ? `${parent.name()}-` : '';
  if (!operation.name.startsWith(prefix)) {
    throw new Error(`The operation ${operation.name} does not belong under ${parent.name()}.`);
  }
  const command = parent.command(operation.name.slice(prefix.length));
  command.description(operation.summary);
  if (operation.scope === 'session') command.addOption(sessionOption());
  REGISTRY.set(command, {
    operation,
    feeders: new Map(),
    alternatives: new Map(),
    cliOnly: new Map(),
  });
  return command;
}

function registered(command: Command) {
  const inputs = REGISTRY.get(command);
  if (!inputs) throw new Error(`The command ${command.name()} was not made by commandFor.`);
  return inputs;
}

/**
 * Adds `input` (an argument or an option) to `command` as what feeds `key` of its operation's
 * input; its choices come from the operation, once the command is about to parse or show its help
 * (see {@link giveChoices}). Throws for a key already fed: a mistake in the CLI's code (as is a key
 * the operation does not take, which the drift test finds: checking it here would make every
 * operation's schema as the command starts).
 */
export function feed(command: Command, key: string, input: CommandInput): Command {
  const { operation, feeders } = registered(command);
  if (feeders.has(key)) {
    throw new Error(`The command ${command.name()} cannot feed "${key}" to ${operation.name}.`);
  }
  feeders.set(key, input);
  return input instanceof Option ? command.addOption(input) : command.addArgument(input);
}

/**
 * Adds `input` to `command` as another way to give `key`, which {@link feed} gave it already (an
 * option beside an argument, spelled as another command spells it): the command's action takes
 * one or the other. Throws for a key not fed yet: a mistake in the CLI's code.
 */
export function feedAlternative(command: Command, key: string, input: CommandInput): Command {
  const { operation, feeders, alternatives } = registered(command);
  if (!feeders.has(key)) {
    throw new Error(`The command ${command.name()} feeds no "${key}" to ${operation.name} yet.`);
  }
  alternatives.set(input, key);
  return input instanceof Option ? command.addOption(input) : command.addArgument(input);
}

/** Commands whose arguments and options have their choices already. */
const WITH_CHOICES = new WeakSet<Command>();

/**
 * Gives the arguments and options of `command` the choices its operation's schema allows (an
 * enum's values): commander then refuses any other value, and the help lists them. Called for the
 * command about to parse (a `preSubcommand` hook) and for the one whose help is shown, so that a
 * command makes only its own operation's schema (see defineOperation). Does nothing for a command
 * built from no operation, or given its choices already.
 */
export function giveChoices(command: Command): void {
  const inputs = REGISTRY.get(command);
  if (!inputs || WITH_CHOICES.has(command)) return;
  WITH_CHOICES.add(command);
  const give = (key: string, input: CommandInput): void => {
    const choices = choicesOf(inputs.operation, key);
    if (choices) input.choices(choices);
  };
  for (const [key, input] of inputs.feeders) give(key, input);
  for (const [input, key] of inputs.alternatives) give(key, input);
}

/** Adds an argument or option that feeds no input (a presentation flag, a prompt's answer), saying why. */
export function addCliOnly(command: Command, input: CommandInput, reason: string): Command {
  registered(command).cliOnly.set(input, reason);
  return input instanceof Option ? command.addOption(input) : command.addArgument(input);
}

/** How the command line spells an input key: `--timeout`, or `ID` for an argument. */
export function spellingOf(command: Command, key: string): string {
  const input = REGISTRY.get(command)?.feeders.get(key);
  if (input === undefined) return key;
  return input instanceof Option ? (input.long ?? input.flags) : input.name().toUpperCase();
}

/** Makes an option repeatable: its value is the list of every value given. */
export function repeatable(option: Option): Option {
  return option.argParser((value: string, previous: string[] = []) => [...previous, value]);
}

/** A number written on the command line, or the text as it was when it is not one (the schema says why). */
export function numberOf(text: string | undefined): number | string | undefined {
  if (text === undefined || text.trim() === '') return text;
  const number = Number(text);
  return Number.isFinite(number) ? number : text;
}

/** `Name: value` header lines as a record. Throws a usage error for a line without a name. */
export function headersOf(lines: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new UsageError(`The header "${line}" is not of the form Name: value.`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

/** Everything `input` yields, as one buffer (nothing when there is no input). */
export async function readAll(input: AsyncIterable<Uint8Array> | undefined): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of input ?? []) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * A JSON message list from a file, or from `stdin` when `file` is undefined. Throws
 * `INVALID_ARGUMENT` for a file that cannot be read or is not JSON, and
 * `CONVERSATION_FORMAT_UNKNOWN` for JSON that is not an array.
 */
export async function readMessages(
  file: string | undefined,
  stdin: AsyncIterable<Uint8Array> | undefined,
): Promise<unknown[]> {
  let text: string;
  try {
    text =
      file === undefined ? (await readAll(stdin)).toString('utf8') : await readFile(file, 'utf8');
  } catch (error) {
    throw new RewindError('INVALID_ARGUMENT', `Cannot read ${file}: ${(error as Error).message}.`, {
      data: { file },
      cause: error,
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${file ?? 'Standard input'} is not JSON (${(error as Error).message}). Give a JSON array of messages.`,
      { data: { file }, cause: error },
    );
  }
  if (!Array.isArray(value)) {
    throw new RewindError(
      'CONVERSATION_FORMAT_UNKNOWN',
      `${file ?? 'Standard input'} holds JSON but not an array: a conversation is an array of messages.`,
      { data: { file } },
    );
  }
  return value;
}
