/**
 * The operation table: every operation Rewind offers, named once, from which the CLI commands, the
 * MCP tools and the framework adapters' tools are built, so no two surfaces can drift apart.
 */
import {
  execOperation,
  httpOperation,
  recordOperation,
  reportOperation,
  showOperation,
} from './actions.js';
import { approveOperation, compensateOperation, discardOperation } from './approval.js';
import { conversationShowOperation, conversationSyncOperation } from './conversation.js';
import type { OperationOn, Surface } from './define-operation.js';
import {
  deleteOperation,
  listOperation,
  mkdirOperation,
  moveOperation,
  readOperation,
  writeOperation,
} from './files.js';
import {
  checkpointOperation,
  checkpointsOperation,
  diffOperation,
  pruneOperation,
  rollbackOperation,
  undoOperation,
} from './history.js';
import { commitOperation, destroyOperation } from './isolation.js';
import { policySetOperation, policyShowOperation } from './policies.js';
import {
  attachOperation,
  gcOperation,
  initOperation,
  logOperation,
  noteOperation,
  pullOperation,
  pushOperation,
  sessionFindOperation,
  sessionListOperation,
  sessionNewOperation,
  sessionUseOperation,
  statusOperation,
  verifyOperation,
} from './store.js';
import { testOperation } from './verification.js';

export {
  type AnyOperation,
  checkInput,
  choicesOf,
  defineOperation,
  type Exclusions,
  type GivenInputOf,
  type InputOf,
  type InputProblem,
  type Operation,
  type OperationAnnotations,
  type OperationOn,
  type OperationTarget,
  type OutputOf,
  type ProgressEvent,
  type Surface,
} from './define-operation.js';
export { FIRST_CHECKPOINT_BUDGET } from './history.js';
export { parseDuration, parseSize } from './inputs.js';
export { structuredOutputOf } from './outputs.js';
export type {
  InitOutput,
  SessionListOutput,
  SessionNewOutput,
  StatusOutput,
} from './store.js';
export { type UndoHint, undoHintOf } from './undo-hint.js';
export {
  approveOperation,
  attachOperation,
  checkpointOperation,
  checkpointsOperation,
  commitOperation,
  compensateOperation,
  conversationShowOperation,
  conversationSyncOperation,
  deleteOperation,
  destroyOperation,
  diffOperation,
  discardOperation,
  execOperation,
  gcOperation,
  httpOperation,
  initOperation,
  listOperation,
  logOperation,
  mkdirOperation,
  moveOperation,
  noteOperation,
  policySetOperation,
  policyShowOperation,
  pruneOperation,
  pullOperation,
  pushOperation,
  readOperation,
  recordOperation,
  reportOperation,
  rollbackOperation,
  sessionFindOperation,
  sessionListOperation,
  sessionNewOperation,
  sessionUseOperation,
  showOperation,
  statusOperation,
  testOperation,
  undoOperation,
  verifyOperation,
  writeOperation,
};

/** Every operation, in the order people meet them. */
export const OPERATIONS = [
  initOperation,
  statusOperation,
  sessionNewOperation,
  sessionListOperation,
  sessionUseOperation,
  sessionFindOperation,
  attachOperation,
  pushOperation,
  pullOperation,
  logOperation,
  noteOperation,
  verifyOperation,
  gcOperation,
  checkpointOperation,
  checkpointsOperation,
  rollbackOperation,
  undoOperation,
  diffOperation,
  pruneOperation,
  conversationSyncOperation,
  conversationShowOperation,
  writeOperation,
  deleteOperation,
  moveOperation,
  mkdirOperation,
  readOperation,
  listOperation,
  execOperation,
  httpOperation,
  showOperation,
  recordOperation,
  reportOperation,
  approveOperation,
  discardOperation,
  compensateOperation,
  commitOperation,
  destroyOperation,
  testOperation,
  policyShowOperation,
  policySetOperation,
] as const;

/** Any row of {@link OPERATIONS}. */
export type TableOperation = (typeof OPERATIONS)[number];

/** The rows of {@link OPERATIONS} that `surface` offers. */
export type OperationsOn<S extends Surface> = OperationOn<TableOperation, S>;
