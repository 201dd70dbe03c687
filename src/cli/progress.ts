/**
 * The progress line a long operation shows on a terminal: one line on stderr, rewritten in place,
 * never in a pipe or a log, and erased once the operation ends.
 */
import type { ProgressEvent } from '../operations/index.js';

/** Work smaller than this ends too soon for a progress line to help. */
const MIN_TOTAL = 100;
/** The line is rewritten at most this often. */
const INTERVAL_MS = 100;

const WORDS: Record<ProgressEvent['step'], string> = {
  reading: 'Reading files',
  restoring: 'Restoring',
  committing: 'Committing',
};

/** A progress line on `write` (stderr): `report` each event, `end` once the work is done. */
export function createProgressLine(
  write: (text: string) => void,
  now: () => number = Date.now,
): { report: (event: ProgressEvent) => void; end: () => void } {
  let shownAt: number | undefined;
  let isShown = false;
  return {
    report: (event) => {
      if (event.total < MIN_TOTAL) return;
      const at = now();
      const isLast = event.done >= event.total;
      if (shownAt !== undefined && at - shownAt < INTERVAL_MS && !isLast) return;
      shownAt = at;
      isShown = true;
      const percent = Math.floor((event.done / event.total) * 100);
      write(
        `\r${WORDS[event.step]} ${event.done.toLocaleString('en')}/${event.total.toLocaleString('en')} (${percent}%)\u001b[K`,
      );
    },
    end: () => {
      if (isShown) write('\r\u001b[K');
      isShown = false;
    },
  };
}
