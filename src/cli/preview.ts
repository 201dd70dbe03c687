/**
 * What a first checkpoint will take, told to people before it is taken: by `init`, and by
 * `checkpoint` when it asks whether to store it.
 */
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import type { SnapshotPreview } from '../index.js';
import { formatBytes, plural } from './format.js';

/** How many of the largest directories and of the paths left out a one-line summary names. */
const NAMED_IN_A_LINE = 3;

/** A budget as it was given to the library: at most this many bytes, or files. */
export interface Budget {
  readonly maxBytes?: number;
  readonly maxFiles?: number;
}

/** Whether `preview` is over `budget`, as `checkpoint` would find it. */
export function isOverBudget(preview: SnapshotPreview, budget: Budget): boolean {
  return (
    (budget.maxBytes !== undefined && preview.sizeBytes > budget.maxBytes) ||
    (budget.maxFiles !== undefined && preview.fileCount > budget.maxFiles)
  );
}

/** `1.0 GiB or 100000 files`. */
export function describeBudget(budget: Budget): string {
  return [
    budget.maxBytes !== undefined && formatBytes(budget.maxBytes),
    budget.maxFiles !== undefined && plural(budget.maxFiles, 'file'),
  ]
    .filter(Boolean)
    .join(' or ');
}

/** The paths a preview left out, directories marked with a trailing `/` (`node_modules/`). */
function markedLeftOut(workspace: string, preview: SnapshotPreview): string[] {
  return preview.leftOut.map((path) => {
    try {
      return lstatSync(join(workspace, path)).isDirectory() ? `${path}/` : path;
    } catch {
      return path;
    }
  });
}

/** `a, b, c and 3 more`: the first `count` of `items`, out of `total`. */
function namedAndMore(items: readonly string[], count: number, total: number): string {
  const named = items.slice(0, count);
  const more = total - named.length;
  if (more <= 0) {
    return named.length <= 1
      ? named.join('')
      : `${named.slice(0, -1).join(', ')} and ${named.at(-1)}`;
  }
  return `${named.join(', ')} and ${more} more`;
}

/**
 * What the rules leave out, as a sentence (empty when nothing is): the first few paths, all
 * those the preview lists with `isVerbose`, then how many more.
 */
function leftOutSentence(
  workspace: string,
  preview: SnapshotPreview,
  isVerbose: boolean | undefined,
): string {
  if (preview.leftOutCount === 0) return '';
  const paths = markedLeftOut(workspace, preview);
  return ` Left out by .gitignore/.rewindignore: ${namedAndMore(paths, isVerbose ? paths.length : NAMED_IN_A_LINE, preview.leftOutCount)}.`;
}

/**
 * What `init` says of a workspace whose first checkpoint is still to come: `The first checkpoint
 * will take 212 files, 1.8 MiB (largest: src/ 1.2 MiB, docs/ 409.6 KiB). Left out by
 * .gitignore/.rewindignore: node_modules/, dist/, .env and 3 more.`
 */
export function renderPreviewLine(
  workspace: string,
  preview: SnapshotPreview,
  isVerbose: boolean | undefined,
): string {
  const largest = preview.largest
    .slice(0, NAMED_IN_A_LINE)
    .map((directory) => `${directory.path}/ ${formatBytes(directory.sizeBytes)}`)
    .join(', ');
  return (
    `The first checkpoint will take ${plural(preview.fileCount, 'file')}, ${formatBytes(preview.sizeBytes)}` +
    (largest ? ` (largest: ${largest})` : '') +
    `.${leftOutSentence(workspace, preview, isVerbose)}\n`
  );
}

/**
 * What a first checkpoint over its budget would store, for a person asked whether to store it:
 * files and bytes, the largest directories one per line, what the rules leave out.
 */
export function renderPreviewQuestion(
  workspace: string,
  preview: SnapshotPreview,
  budget: Budget,
  isVerbose: boolean | undefined,
): string {
  const lines = [
    `The first checkpoint reads and stores every file: ${plural(preview.fileCount, 'file')}, ${formatBytes(preview.sizeBytes)}, over the budget of ${describeBudget(budget)}.`,
  ];
  if (preview.largest.length > 0) {
    lines.push('Largest directories:');
    for (const directory of preview.largest) {
      lines.push(
        `  ${`${directory.path}/`.padEnd(24)} ${formatBytes(directory.sizeBytes).padStart(10)}  ${plural(directory.fileCount, 'file')}`,
      );
    }
  }
  const leftOut = leftOutSentence(workspace, preview, isVerbose).trim();
  lines.push(
    leftOut || 'Nothing is left out by .gitignore or .rewindignore.',
    'To leave build output or dependencies out, add them to .gitignore or .rewindignore.',
  );
  return `${lines.join('\n')}\n`;
}
