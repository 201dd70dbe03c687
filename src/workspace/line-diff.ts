import { diffArrays } from 'diff';

/** A run of lines the same on both sides, only in the old text, or only in the new text. */
export interface LineRun {
  lines: string[];
  added: boolean;
  removed: boolean;
}

/**
 * Diffs with at most this many lines removed and added are computed exactly (a shortest edit
 * script, Myers's algorithm, whose cost grows with the size of the edit times the size of the
 * files); larger ones take the bounded way of `lineRuns`.
 */
export const EXACT_EDIT_LIMIT = 2000;

/**
 * A text's lines, each with its line ending (`\n` or `\r\n`); the last has none if the text does
 * not end with one. The same lines as the diff library's line diff splits.
 */
export function linesOf(text: string): string[] {
  if (text === '') return [];
  const pieces = text.split(/(\n|\r\n)/);
  const lines: string[] = [];
  for (let i = 0; i < pieces.length; i += 2) {
    const line = (pieces[i] ?? '') + (pieces[i + 1] ?? '');
    if (line !== '') lines.push(line);
  }
  return lines;
}

function exactRuns(
  before: readonly string[],
  after: readonly string[],
  limit: number,
): LineRun[] | undefined {
  const changes = diffArrays(before as string[], after as string[], { maxEditLength: limit });
  return changes?.map((change) => ({
    lines: change.value,
    added: change.added,
    removed: change.removed,
  }));
}

/** A line matched in both texts: its index in the old text and in the new one. */
type Match = readonly [number, number];

interface Region {
  beforeStart: number;
  beforeEnd: number;
  afterStart: number;
  afterEnd: number;
}

/**
 * The lines that occur exactly once in each side of a region, paired, longest increasing by
 * position in both (patience diff's anchors), by patience sorting.
 */
function uniqueAnchors(before: readonly string[], after: readonly string[], r: Region): Match[] {
  const seen = new Map<
    string,
    { before: number; after: number; beforeAt: number; afterAt: number }
  >();
  const note = (line: string) => {
    let counts = seen.get(line);
    if (!counts) {
      counts = { before: 0, after: 0, beforeAt: -1, afterAt: -1 };
      seen.set(line, counts);
    }
    return counts;
  };
  for (let i = r.beforeStart; i < r.beforeEnd; i++) {
    const counts = note(before[i] as string);
    counts.before++;
    counts.beforeAt = i;
  }
  for (let j = r.afterStart; j < r.afterEnd; j++) {
    const counts = note(after[j] as string);
    counts.after++;
    counts.afterAt = j;
  }
  const pairs: Match[] = [];
  for (let i = r.beforeStart; i < r.beforeEnd; i++) {
    const counts = seen.get(before[i] as string);
    if (counts?.before === 1 && counts.after === 1) pairs.push([i, counts.afterAt]);
  }
  // Longest increasing subsequence of the pairs' new-text positions.
  const tails: number[] = [];
  const previous: number[] = new Array(pairs.length).fill(-1);
  for (let p = 0; p < pairs.length; p++) {
    const j = (pairs[p] as Match)[1];
    let low = 0;
    let high = tails.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if ((pairs[tails[middle] as number] as Match)[1] < j) low = middle + 1;
      else high = middle;
    }
    if (low > 0) previous[p] = tails[low - 1] as number;
    tails[low] = p;
  }
  const anchors: Match[] = [];
  for (let p = tails.at(-1) ?? -1; p !== -1; p = previous[p] as number) {
    anchors.push(pairs[p] as Match);
  }
  return anchors.reverse();
}

/**
 * Matches in a region with no unique anchors, as git does: lines that do not occur on the other
 * side cannot match and are set aside, and the rest is diffed exactly if its edit is small enough;
 * otherwise nothing in the region matches (it shows as replaced).
 */
function reducedMatches(
  before: readonly string[],
  after: readonly string[],
  r: Region,
  matches: Match[],
): void {
  const inBefore = new Set(before.slice(r.beforeStart, r.beforeEnd));
  const inAfter = new Set(after.slice(r.afterStart, r.afterEnd));
  const beforeKept: number[] = [];
  const afterKept: number[] = [];
  for (let i = r.beforeStart; i < r.beforeEnd; i++) {
    if (inAfter.has(before[i] as string)) beforeKept.push(i);
  }
  for (let j = r.afterStart; j < r.afterEnd; j++) {
    if (inBefore.has(after[j] as string)) afterKept.push(j);
  }
  if (beforeKept.length === 0 || afterKept.length === 0) return;
  const runs = exactRuns(
    beforeKept.map((i) => before[i] as string),
    afterKept.map((j) => after[j] as string),
    EXACT_EDIT_LIMIT,
  );
  if (!runs) return;
  let i = 0;
  let j = 0;
  for (const run of runs) {
    if (run.added) j += run.lines.length;
    else if (run.removed) i += run.lines.length;
    else {
      for (let k = 0; k < run.lines.length; k++) {
        matches.push([beforeKept[i + k] as number, afterKept[j + k] as number]);
      }
      i += run.lines.length;
      j += run.lines.length;
    }
  }
}

/** Matched lines of a diff too large to compute exactly: patience diff, then git's reduction. */
function boundedMatches(before: readonly string[], after: readonly string[]): Match[] {
  const matches: Match[] = [];
  const regions: Region[] = [
    { beforeStart: 0, beforeEnd: before.length, afterStart: 0, afterEnd: after.length },
  ];
  for (let r = regions.pop(); r; r = regions.pop()) {
    while (
      r.beforeStart < r.beforeEnd &&
      r.afterStart < r.afterEnd &&
      before[r.beforeStart] === after[r.afterStart]
    ) {
      matches.push([r.beforeStart++, r.afterStart++]);
    }
    while (
      r.beforeStart < r.beforeEnd &&
      r.afterStart < r.afterEnd &&
      before[r.beforeEnd - 1] === after[r.afterEnd - 1]
    ) {
      matches.push([--r.beforeEnd, --r.afterEnd]);
    }
    if (r.beforeStart === r.beforeEnd || r.afterStart === r.afterEnd) continue;
    const anchors = uniqueAnchors(before, after, r);
    if (anchors.length === 0) {
      reducedMatches(before, after, r, matches);
      continue;
    }
    let beforeStart = r.beforeStart;
    let afterStart = r.afterStart;
    for (const [i, j] of anchors) {
      regions.push({ beforeStart, beforeEnd: i, afterStart, afterEnd: j });
      matches.push([i, j]);
      beforeStart = i + 1;
      afterStart = j + 1;
    }
    regions.push({ beforeStart, beforeEnd: r.beforeEnd, afterStart, afterEnd: r.afterEnd });
  }
  return matches.sort((x, y) => x[0] - y[0]);
}

/** Runs from matched lines: between two matches, the old lines removed, then the new added. */
function runsOfMatches(
  before: readonly string[],
  after: readonly string[],
  matches: readonly Match[],
): LineRun[] {
  const runs: LineRun[] = [];
  const push = (lines: string[], added: boolean, removed: boolean) => {
    if (lines.length === 0) return;
    const last = runs.at(-1);
    if (last && last.added === added && last.removed === removed) last.lines.push(...lines);
    else runs.push({ lines, added, removed });
  };
  let i = 0;
  let j = 0;
  for (const [mi, mj] of [...matches, [before.length, after.length] as const]) {
    push(before.slice(i, mi), false, true);
    push(after.slice(j, mj), true, false);
    if (mi < before.length) push([before[mi] as string], false, false);
    i = mi + 1;
    j = mj + 1;
  }
  return runs;
}

/**
 * The line diff of two texts' lines, as runs in order. A diff of up to `EXACT_EDIT_LIMIT` changed
 * lines is a shortest one (what the diff library gives); a larger one is found in bounded time
 * like git's: common lines at the ends, patience anchors (lines once on each side), lines found
 * on one side only set aside, and a region still too different shown as replaced. It is a
 * correct diff, not always the shortest.
 */
export function lineRuns(before: readonly string[], after: readonly string[]): LineRun[] {
  return exactRuns(before, after, EXACT_EDIT_LIMIT) ?? boundedRuns(before, after);
}

/** The bounded way of `lineRuns`, whatever the size of the edit (exported for its tests). */
export function boundedRuns(before: readonly string[], after: readonly string[]): LineRun[] {
  return runsOfMatches(before, after, boundedMatches(before, after));
}

/**
 * The hunks of a unified diff with `context` lines around each change, each line without its
 * `\n` and followed by git's "\ No newline at end of file" where it has none; formatted as the
 * diff library's `structuredPatch` and `formatPatch` do.
 */
export function unifiedHunks(runs: readonly LineRun[], context: number): string {
  const out: string[] = [];
  const all = [...runs, { lines: [], added: false, removed: false }];
  let oldStart = 0;
  let newStart = 0;
  let oldLine = 1;
  let newLine = 1;
  let hunk: string[] = [];
  const closeHunk = (oldLines: number, newLines: number) => {
    const oldAt = oldLines === 0 ? oldStart - 1 : oldStart;
    const newAt = newLines === 0 ? newStart - 1 : newStart;
    out.push(`@@ -${oldAt},${oldLines} +${newAt},${newLines} @@\n`);
    for (const line of hunk) {
      out.push(line.endsWith('\n') ? line : `${line}\n\\ No newline at end of file\n`);
    }
  };
  for (let index = 0; index < all.length; index++) {
    const run = all[index] as LineRun;
    if (run.added || run.removed) {
      if (!oldStart) {
        oldStart = oldLine;
        newStart = newLine;
        const previous = all[index - 1];
        if (previous) {
          hunk = context > 0 ? previous.lines.slice(-context).map((line) => ` ${line}`) : [];
          oldStart -= hunk.length;
          newStart -= hunk.length;
        }
      }
      const sign = run.added ? '+' : '-';
      for (const line of run.lines) hunk.push(sign + line);
      if (run.added) newLine += run.lines.length;
      else oldLine += run.lines.length;
      continue;
    }
    if (oldStart) {
      if (run.lines.length <= context * 2 && index < all.length - 2) {
        for (const line of run.lines) hunk.push(` ${line}`);
      } else {
        const contextSize = Math.min(run.lines.length, context);
        for (const line of run.lines.slice(0, contextSize)) hunk.push(` ${line}`);
        closeHunk(oldLine - oldStart + contextSize, newLine - newStart + contextSize);
        oldStart = 0;
        newStart = 0;
        hunk = [];
      }
    }
    oldLine += run.lines.length;
    newLine += run.lines.length;
  }
  return out.join('');
}
