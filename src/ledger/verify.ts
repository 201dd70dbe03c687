import { digestEntry, type LedgerEntry } from './entry.js';
import type { LedgerReading } from './ledger.js';

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
 * every entry after the first carries the digest of the one before. A line that is not an entry
 * is damage only when it is the last line and complete (a torn write never ends with a newline);
 * elsewhere it is a torn write that a later append sealed, or junk, and any entry it destroyed
 * shows as a seq gap. Returns the problems in file order; the first `chain-broken` is where
 * tampering or damage begins.
 */
export function checkLedger(
  reading: Pick<LedgerReading, 'entries' | 'damagedLastLine'>,
  isHashChained: boolean,
): LedgerProblem[] {
  const problems: LedgerProblem[] = [];
  const damaged = reading.damagedLastLine;
  if (damaged) {
    problems.push({
      type: 'line-unreadable',
      line: damaged.line,
      message: `the last line (${damaged.line}) is complete but is not a ledger entry (${damaged.reason}): the newest entry may be damaged`,
    });
  }
  let previous: LedgerEntry | undefined;
  for (const entry of reading.entries) {
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
      if (expected === undefined) {
        problems.push({
          type: 'chain-broken',
          seq: entry.seq,
          message: `entry #${entry.seq} follows entry #${previous.seq}, which cannot be hashed (it holds a number or a nesting that canonical JSON cannot encode): entry #${previous.seq} was damaged`,
        });
      } else if (entry.prev !== expected) {
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
