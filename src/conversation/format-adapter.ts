// What every format shares: the format names, the message types, the Adapter, small readers.

/** The message formats Rewind reads and repairs. */
export const FORMATS = [
  'openai-chat',
  'openai-responses',
  'anthropic',
  'gemini',
  'ai-sdk',
  'langchain',
  'openai-agents',
] as const;

/** A message format: see {@link FORMATS}. */
export type Format = (typeof FORMATS)[number];

/** A message as JSON: Rewind never needs more than its JSON form. */
export type Message = Record<string, unknown>;

/** A tool call as a format states it: its id (absent for some Gemini calls) and name. */
export interface Call {
  id: string | undefined;
  name: string;
}

/** A tool result: the id of the call it answers (absent for some Gemini results) and its name. */
export interface Result {
  id: string | undefined;
  name: string | undefined;
}

/**
 * What differs between formats, for pairing calls with results. Results are either separate
 * messages right after the call (`tool-messages`: OpenAI Chat, AI SDK, LangChain), parts at the
 * start of the next user turn (`next-user-turn`: Anthropic, Gemini), or items anywhere after the
 * call (`items`: OpenAI Responses).
 */
export interface Adapter {
  format: Format;
  placement: 'tool-messages' | 'next-user-turn' | 'items';
  /** True when `value` has this format's shape. */
  isMessage(value: unknown): boolean;
  /** The role as the provider names it, for validation (`user`, `assistant`, `model`, `tool`...). */
  roleOf(message: Message): string;
  /** Roles the provider accepts in the list. */
  roles: readonly string[];
  /** The tool calls a message makes that a client must answer. */
  callsOf(message: Message): Call[];
  /** The tool results a message carries. */
  resultsOf(message: Message): Result[];
  /** True when the message is a turn a person wrote (a user turn holding no tool results). */
  isRequest(message: Message): boolean;
  /** True when the message holds only results (a tool message, a user turn of results only). */
  isOnlyResults(message: Message): boolean;
  /** The message without the results `drop` selects; undefined when nothing else remains. */
  withoutResults(
    message: Message,
    drop: (result: Result, index: number) => boolean,
  ): Message | undefined;
  /** The result parts of a message (for moving them), in order. */
  resultParts(message: Message): unknown[];
  /** The message with `parts` (result parts) put first. */
  withResultsFirst(message: Message, parts: unknown[]): Message;
  /** A message holding only these result parts (the user turn or tool message that carries them). */
  resultsMessage(parts: unknown[], like: Message | undefined): Message[];
  /** A result part answering `call` with an error saying why. */
  syntheticResult(call: Call, text: string, like: Message | undefined): unknown;
  /** The message without the calls `drop` selects; undefined when nothing else remains. */
  withoutCalls(message: Message, drop: (call: Call) => boolean): Message | undefined;
  /** True when the message holds signed reasoning that must never be edited. */
  hasSignedReasoning(message: Message): boolean;
  /** A note to the model, as the provider accepts it after this history. */
  note(text: string, like: Message | undefined): Message;
  /** True when a note may be merged into `message` (a user turn) rather than added after it. */
  canHoldNote(message: Message): boolean;
  /** `message` with the note text added at its end. */
  withNote(message: Message, text: string): Message;
}

/** True when `value` is an object that is neither null nor an array. */
export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `String(value)`, for a value from a message list of any shape (see the lib's `textOf`). */
export { textOf } from '../lib/index.js';

/** `value` when it is an array, else an empty one: an absent list reads as empty. */
export const arrayOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

/**
 * The parts of a message's `content` (Anthropic blocks, AI SDK parts): both formats take a string
 * as shorthand for one text part, so it reads as that part.
 */
export const contentPartsOf = (message: Message): Record<string, unknown>[] =>
  typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : arrayOf(message.content).filter(isObject);
