export type { DraftInfo } from './actions/drafts.js';
export type { ExecOptions, ExecResult } from './actions/exec.js';
export type { RecordOptions } from './actions/external.js';
export type { HttpActionOptions, HttpResult } from './actions/http.js';
export type {
  ActionResult,
  ActionSpec,
  Compensation,
  ExecSpec,
  HttpSpec,
  RecordSpec,
} from './actions/journaled-spec.js';
export {
  type CheckpointOptions,
  type CheckpointResult,
  checkLabel,
  uncountedLinesWarnings,
} from './history/checkpoints.js';
export type { ConversationState, RestoredConversation } from './history/conversation.js';
export type { DiffResult } from './history/diff.js';
export type { PruneOptions, PruneResult } from './history/prune.js';
export type {
  PlannedChange,
  RollbackOptions,
  RollbackResult,
  RollbackScope,
} from './history/rollback.js';
export type { UndoConflict, UndoOptions, UndoResult } from './history/undo.js';
export type {
  CommitConflict,
  CommitOptions,
  CommitResult,
  EndOptions,
  EndResult,
  SessionStatus,
} from './isolation.js';
export type { ActionClass, ActionState, PathChange } from './journal/action-records.js';
export type { CheckpointInfo } from './journal/checkpoint-records.js';
export type { IsolatedSessionOptions, OpenSessionOptions } from './open.js';
export {
  attachSession,
  openSession,
  startIsolatedSession,
  withIsolatedSession,
} from './open-session.js';
export {
  type EscalationHandler,
  escalationFor,
  HaltError,
  promptEscalation,
  type Resolution,
  stopEscalation,
} from './policies/escalation.js';
export type { AutoRollbackReport, SessionPolicies } from './policies/policy-state.js';
export type { Protections } from './protections.js';
export type { ActionDetail, ActionInfo, StoredText } from './reads.js';
export {
  currentSessionId,
  type InitResult,
  init,
  type LogLine,
  type LogReport,
  ledgerRevision,
  locateWorkspace,
  log,
  type NewSessionOptions,
  type NoteResult,
  note,
  previewWorkspace,
  type SessionSummary,
  type StatusReport,
  startSession,
  status,
  useSession,
  type WorkspaceOptions,
} from './repository.js';
export { Session } from './session.js';
export {
  type AttachResult,
  attachShared,
  type CopyResult,
  findSharedSessions,
  pullSession,
  pushedStoreId,
  pushSession,
  type SharedBackends,
} from './shared.js';
export {
  type GcReport,
  gc,
  type VerifyProblem,
  type VerifyReport,
  verify,
} from './store-checks.js';
