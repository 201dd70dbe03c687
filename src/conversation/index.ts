export {
  adapterOf,
  type Call,
  checkFormat,
  detectFormat,
  FORMATS,
  type Format,
  type Message,
  type Result,
} from './formats.js';
export {
  type ConversationProblem,
  DEFAULT_RESULT_TEXT,
  type NoteOptions,
  type RepairOptions,
  type RepairResult,
  type RepairStrategy,
  repair,
  resumeNote,
  syntheticResult,
  type ValidationReport,
  validate,
  withResumeNote,
} from './repair.js';
export { readConversation, type StoredConversation, storeConversation } from './store.js';
export type { LangChainSerialized, NoteOf, SyntheticResultOf } from './types.js';
