export { type Call, FORMATS, type Format, type Message, type Result } from './format-adapter.js';
export { adapterOf, checkFormat, detectFormat, plainMessages } from './formats.js';
export {
  DEFAULT_RESULT_TEXT,
  type NoteOptions,
  noteText,
  RESUME_NOTE_OPENING,
  type RepairOptions,
  type RepairResult,
  type RepairStrategy,
  repair,
  requestToKeep,
  resumeNote,
  syntheticResult,
  withResumeNote,
} from './repair.js';
export { readConversation, type StoredConversation, storeConversation } from './store.js';
export type { LangChainSerialized, NoteOf, SyntheticResultOf } from './types.js';
export { type ConversationProblem, type ValidationReport, validate } from './validate.js';
