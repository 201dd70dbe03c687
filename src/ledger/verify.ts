import type { UnreadableLine } from '../lib/index.js';
import { digestEntry, type LedgerEntry } from './entry.js';

/** A problem found in a ledger. */
export interface LedgerProblem {
  /** `seq-broken`: seq not 1, 2, 3...; `chain-broken`: `prev` does not match the entry before. */
  type: 'seq-broken' | 'chain-broken' | 'line-unreadable';
  /** The entry where the problem shows, when there is one. */
  seq?: number;
  line?: number;
  message: string;
}

/**
 * Checks a ledger's entries: seq runs 1, 2, 3... without gaps, and in a hash-chained session
 * every entry after the first carries the digest of the one before. Lines that are not entries
 * are reported too, except a torn final line, which a crash leaves and the reader ignores.
 * Returns the problems in file order; the first `chain-broken` is where tampering or damage
 * begins.
 */
export function checkLedger(
  entries: readonly LedgerEntry[],
  unreadable: readonly UnreadableLine[],
  isHashChained: boolean,
): LedgerProblem[] {
  const problems: LedgerProblem[] = [];
  for (const line of unreadable) {
    if (line.isTorn) continue;
    problems.push({
      type: 'line-unreadable',
      line: line.line,
      message: `line ${line.line} is not a ledger entry (${line.reason})`,
    });
  }
  let previous: LedgerEntry | undefined;
  for (const entry of entries) {
    const expectedSeq = (previous?.seq ?? 0) + 1;
    if (entry.seq !== expectedSeq) {
      problems.push({
        type: 'seq-broken',
        seq: entry.seq,
        message: `entry #${entry.seq} follows #${previous?.seq ?? 0}; expected #${expectedSeq}`,
      });
    }
    if (isHashChained && previous) {
      const expected = digestEntry(previous);
      if (entry.prev !== expected) {
        problems.push({
          type: 'chain-broken',
          seq: entry.seq,
          message:
            entry.prev === undefined
              ? `entry #${entry.seq} carries no hash of entry #${previous.seq}`
              : `entry #${entry.seq} carries a hash that does not match entry #${previous.seq}: it or an entry before it was changed`,
        });
      }
    }
    previous = entry;
  }
  return problems;
}
