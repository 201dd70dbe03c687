import type { Message } from '../../conversation/index.js';
import type { VerifierConfig } from '../../verifier/index.js';
import type { RollbackScope } from '../history/rollback.js';
import type { EscalationHandler } from './escalation.js';

/** What the last automatic rollback did. */
export interface AutoRollbackReport {
  event: 'exception' | 'test-failure' | 'escalation';
  to: string;
  /** True when it was skipped because it would have changed nothing. */
  isSkipped: boolean;
  /** The restored conversation, when the checkpoint had one. */
  messages: Message[] | undefined;
}

/** The policies a session has on, as `Session.policies` describes them. */
export interface SessionPolicies {
  autoCheckpoint: { trigger: 'before-tool-call'; keepLast?: number } | undefined;
  autoRollback:
    | {
        on: ('exception' | 'test-failure')[];
        to: string;
        scope: RollbackScope;
        verifier?: VerifierConfig;
      }
    | undefined;
}

/** The policy set by `Session.autoRollback`. */
export interface RollbackPolicy {
  on: ReadonlySet<'exception' | 'test-failure'>;
  to: string;
  scope: RollbackScope;
  verifier: VerifierConfig | undefined;
  escalation: EscalationHandler;
}

/**
 * A session's policies and the state they keep between tool calls: the only mutable state of a
 * session, owned by its facade and handed to the few functions that act on it.
 */
export interface PolicyState {
  checkpoint: { trigger: 'before-tool-call'; keepLast: number | undefined } | undefined;
  rollback: RollbackPolicy | undefined;
  /** Automatic checkpoints taken so far, numbering their labels. */
  autoCheckpointCount: number;
  /** How many wrapped tool calls are running (at most one): inside one, the wrapper decides. */
  toolDepth: number;
  /** Tool calls run one at a time: a checkpoint never interleaves with another call's write. */
  toolQueue: Promise<unknown>;
  /** The last automatic rollback that changed something. */
  lastAutoRollback: AutoRollbackReport | undefined;
  /** How many automatic rollbacks changed something: a tool call tells whether one ran inside it. */
  autoRollbackCount: number;
  /** The model steps of wrapped calls (see `ToolOptions.step`), by the key their adapter gave. */
  steps: WeakMap<object, ToolStep>;
  /** The agent runs one of whose wrapped calls rolled back (see `ToolOptions.run`): the rollback. */
  rolledBackRuns: WeakMap<object, AutoRollbackReport>;
  /**
   * While a call of a step runs: the checkpoint taken before the step's first call. A rollback to
   * the policy's `latest` goes no later than it (a later one pairs files changed by sibling calls
   * with a conversation that does not hold them).
   */
  stepFloor: string | undefined;
}

/** What the calls a model asked for at once share. */
export interface ToolStep {
  /** The checkpoint taken before its first call, when the policy took one. */
  floor: string | undefined;
  /** The automatic rollback one of its calls made: the later calls are refused. */
  rolledBack: AutoRollbackReport | undefined;
  /** The halt one of its calls raised: the later calls are refused with it. */
  halt: Error | undefined;
}

/** No policy on, nothing running. */
export function createPolicyState(): PolicyState {
  return {
    checkpoint: undefined,
    rollback: undefined,
    autoCheckpointCount: 0,
    toolDepth: 0,
    toolQueue: Promise.resolve(),
    lastAutoRollback: undefined,
    autoRollbackCount: 0,
    steps: new WeakMap(),
    rolledBackRuns: new WeakMap(),
    stepFloor: undefined,
  };
}
