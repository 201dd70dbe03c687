import type { Format } from './format-adapter.js';

/** A serialized LangChain message (`toJSON()` form) that Rewind creates. */
export interface LangChainSerialized {
  lc: 1;
  type: 'constructor';
  id: string[];
  kwargs: Record<string, unknown>;
}

/** The resume note Rewind creates, per format (see `resumeNote`). */
export interface NoteOf {
  'openai-chat': { role: 'system'; content: string };
  'openai-responses': { type: 'message'; role: 'developer'; content: string };
  anthropic: { role: 'user'; content: { type: 'text'; text: string }[] };
  gemini: { role: 'user'; parts: { text: string }[] };
  'ai-sdk': { role: 'user'; content: { type: 'text'; text: string }[] };
  langchain: LangChainSerialized;
  'openai-agents': { type: 'message'; role: 'user'; content: string };
}

/** The synthetic result Rewind creates for a call left without one, per format. */
export interface SyntheticResultOf {
  'openai-chat': { role: 'tool'; tool_call_id: string; content: string };
  'openai-responses': { type: 'function_call_output'; call_id: string; output: string };
  anthropic: { type: 'tool_result'; tool_use_id: string; content: string; is_error: boolean };
  gemini: { functionResponse: { id?: string; name: string; response: { error: string } } };
  'ai-sdk': {
    type: 'tool-result';
    toolCallId: string;
    toolName: string;
    output: { type: 'error-text'; value: string };
  };
  langchain: LangChainSerialized;
  'openai-agents': {
    type: 'function_call_result';
    callId: string;
    name: string;
    status: 'incomplete';
    output: { type: 'text'; text: string };
  };
}

/** Checks, at compile time, that the two maps above cover every format. */
export type CoversEveryFormat = [Format] extends [keyof NoteOf & keyof SyntheticResultOf]
  ? true
  : never;
