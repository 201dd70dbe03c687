import { createHash } from 'node:crypto';
import { applyPatch, createTwoFilesPatch } from 'diff';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ObjectStore, TreeEntry } from '../../src/store/index.js';
import { countLineChanges, renderDiff } from '../../src/workspace/index.js';
import { boundedRuns, linesOf as splitLines } from '../../src/workspace/line-diff.js';

/** An object store of the given texts, by digest: all `renderDiff` reads of one. */
function storeOf(texts: readonly string[]): ObjectStore {
  const objects = new Map(texts.map((text) => [digestOf(text), Buffer.from(text)]));
  return {
    get: async (digest: string) => objects.get(digest) as Buffer,
  } as unknown as ObjectStore;
}

function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function fileEntry(text: string): TreeEntry {
  return {
    name: 'f.txt',
    type: 'file',
    mode: 0o644,
    sizeBytes: Buffer.byteLength(text),
    digest: digestOf(text) as never,
  };
}

async function diffOf(before: string, after: string): Promise<string> {
  const change = { path: 'f.txt', before: fileEntry(before), after: fileEntry(after) };
  return renderDiff(storeOf([before, after]), [change]);
}

async function countsOf(before: string, after: string) {
  const change = { path: 'f.txt', before: fileEntry(before), after: fileEntry(after) };
  return countLineChanges(storeOf([before, after]), [change]);
}

/** What the diff library's own unified diff gives, with git's names: the output as it was. */
function libraryDiff(before: string, after: string): string {
  const patch = createTwoFilesPatch('a', 'b', before, after, undefined, undefined, { context: 3 });
  return patch.replace(/^=+\n--- a\n\+\+\+ b\n/, '--- a/f.txt\n+++ b/f.txt\n');
}

/** The length of a longest common subsequence of two line lists, by the textbook table. */
function lcsLength(a: readonly string[], b: readonly string[]): number {
  let row = new Array<number>(b.length + 1).fill(0);
  for (const line of a) {
    const next = new Array<number>(b.length + 1).fill(0);
    for (let j = 1; j <= b.length; j++) {
      next[j] =
        line === b[j - 1]
          ? (row[j - 1] as number) + 1
          : Math.max(row[j] as number, next[j - 1] as number);
    }
    row = next;
  }
  return row[b.length] as number;
}

function linesOf(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** Texts from few distinct lines, so that they share many lines; some without a final newline. */
const smallText = fc
  .tuple(
    fc.array(fc.constantFrom('a', 'b', 'c', 'd', '', 'x\r', '}'), { maxLength: 25 }),
    fc.boolean(),
  )
  .map(([lines, endsWithNewline]) => {
    const text = lines.join('\n');
    return endsWithNewline && text !== '' ? `${text}\n` : text;
  });

describe('renderDiff', () => {
  it('is the same unified diff as before for small inputs, and a shortest one', async () => {
    await fc.assert(
      fc.asyncProperty(smallText, smallText, async (before, after) => {
        fc.pre(before !== after);
        const text = await diffOf(before, after);
        expect(text).toBe(libraryDiff(before, after));
        const [a, b] = [linesOf(before), linesOf(after)];
        const counts = await countsOf(before, after);
        expect(counts.linesRemoved).toBe(a.length - lcsLength(a, b));
        expect(counts.linesAdded).toBe(b.length - lcsLength(a, b));
      }),
      { numRuns: 500 },
    );
  });

  it('diffs 20,000 changed lines quickly, as a diff that applies', async () => {
    const before = Array.from({ length: 20_000 }, (_, i) => `old line ${i}\n`).join('');
    const after = Array.from({ length: 20_000 }, (_, i) => `new line ${i}\n`).join('');
    const started = Date.now();
    const text = await diffOf(before, after);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(
      text.startsWith('--- a/f.txt\n+++ b/f.txt\n@@ -1,20000 +1,20000 @@\n-old line 0\n'),
    ).toBe(true);
    expect(applyPatch(before, text)).toBe(after);
    expect(await countsOf(before, after)).toEqual({ linesAdded: 20_000, linesRemoved: 20_000 });
  });

  it('keeps what is common in a large edit: blank lines and unchanged lines between changes', async () => {
    // Every other line changed (D = 20,000), the lines between them shared, some not unique.
    const side = (word: string) =>
      Array.from({ length: 20_000 }, (_, i) =>
        i % 2 ? `${word} ${i}\n` : i % 4 ? '\n' : `same ${i}\n`,
      ).join('');
    const [before, after] = [side('old'), side('new')];
    const started = Date.now();
    const text = await diffOf(before, after);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(applyPatch(before, text)).toBe(after);
    expect(await countsOf(before, after)).toEqual({ linesAdded: 10_000, linesRemoved: 10_000 });
  });

  it('finds a correct diff the bounded way too (used past 2,000 changed lines)', () => {
    fc.assert(
      fc.property(smallText, smallText, (before, after) => {
        const runs = boundedRuns(splitLines(before), splitLines(after));
        const side = (skip: 'added' | 'removed') =>
          runs
            .filter((run) => !run[skip])
            .flatMap((run) => run.lines)
            .join('');
        expect(side('added')).toBe(before);
        expect(side('removed')).toBe(after);
        for (const [run, next] of runs.map((run, i) => [run, runs[i + 1]] as const)) {
          if (next) expect([next.added, next.removed]).not.toEqual([run.added, run.removed]);
        }
      }),
      { numRuns: 500 },
    );
  });
});
