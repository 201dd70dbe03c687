/** How an action can be taken back: one classification that every edge words its own way. */
import type { ActionResult } from '../index.js';

/**
 * How an action is taken back: `undo` (reversible), `compensate` (its declared compensation),
 * `approve-or-discard` (a draft: nothing happened yet), or `nothing` with why.
 */
export type UndoHint =
  | { readonly way: 'undo'; readonly id: number }
  | { readonly way: 'compensate'; readonly id: number }
  | { readonly way: 'approve-or-discard'; readonly id: number }
  | { readonly way: 'nothing'; readonly reason: 'discarded' | 'irreversible' };

/** How `result`'s action is taken back, from its state and class. */
export function undoHintOf(result: ActionResult): UndoHint {
  if (result.state === 'draft') return { way: 'approve-or-discard', id: result.id };
  if (result.state === 'discarded') return { way: 'nothing', reason: 'discarded' };
  if (result.class === 'reversible') return { way: 'undo', id: result.id };
  if (result.class === 'compensable') return { way: 'compensate', id: result.id };
  return { way: 'nothing', reason: 'irreversible' };
}
