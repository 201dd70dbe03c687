// The page's state logic that needs no browser: which request may run, where the keyboard moves
// in the timeline, how an action or a checkpoint stands, how a stored body reads. Bundled into
// app.js with the rest of ui/; tested in node (test/ui/state.test.ts).

/**
 * One request at a time: `run(name, task)` starts `task` and answers its promise, or answers
 * undefined, starting nothing, while another runs (a double click, a second button). `onChange`
 * hears the name of the request running, then undefined once it ended.
 */
export function createGate(onChange) {
  let running;
  return {
    get running() {
      return running;
    },
    run(name, task) {
      if (running !== undefined) return undefined;
      running = name;
      onChange(name);
      const settle = () => {
        running = undefined;
        onChange(undefined);
      };
      let started;
      try {
        started = Promise.resolve(task());
      } catch (error) {
        started = Promise.reject(error);
      }
      return started.then(
        (value) => {
          settle();
          return value;
        },
        (error) => {
          settle();
          throw error;
        },
      );
    },
  };
}

/**
 * The option a key moves to in a list of `seqs` from `current` (undefined for none): ArrowDown
 * and ArrowUp by one (staying at the ends), Home and End to the ends. Undefined for another key.
 */
export function moveCursor(seqs, current, key) {
  if (seqs.length === 0) return undefined;
  const index = seqs.indexOf(current);
  switch (key) {
    case 'ArrowDown':
      return seqs[index === -1 ? 0 : Math.min(index + 1, seqs.length - 1)];
    case 'ArrowUp':
      return seqs[index === -1 ? seqs.length - 1 : Math.max(index - 1, 0)];
    case 'Home':
      return seqs[0];
    case 'End':
      return seqs.at(-1);
    default:
      return undefined;
  }
}

/**
 * An action's state as the page shows it: `running` (with the process's `pid`) for the one a
 * live process runs now, which the ledger alone cannot tell from one a killed process left
 * (`interrupted`); else the state the log derived.
 */
export function actionStateOf(line, running) {
  if (running !== undefined && running.id === line.seq)
    return { state: 'running', pid: running.pid };
  return { state: line.action?.state };
}

/** The seqs of the checkpoints pruned since they were made (their `checkpoint-created` entries). */
export function prunedCheckpoints(entries) {
  return new Set(
    entries
      .filter((line) => line.kind === 'checkpoint-pruned')
      .map((line) => Number(line.entry.body.checkpointSeq)),
  );
}

/** `1 path`, `2 paths`. */
export const plural = (count, noun) => `${count} ${noun}${count === 1 ? '' : 's'}`;

/**
 * A stored body or output as the page shows it: `text` (empty for bytes that are not UTF-8,
 * which would read as garbage) and `note`, what a person must know besides: `binary, N bytes`,
 * or that only the first bytes were kept.
 */
export function storedBody(stored) {
  if (!stored) return { text: '', note: undefined };
  const notes = [];
  if (stored.base64 !== undefined) notes.push(`binary, ${plural(stored.sizeBytes, 'byte')}`);
  if (stored.truncated)
    notes.push(`truncated: only the first ${plural(stored.sizeBytes, 'byte')} were kept`);
  return {
    text: stored.base64 !== undefined ? '' : stored.text,
    note: notes.length > 0 ? notes.join('; ') : undefined,
  };
}
