/** Local time as `YYYY-MM-DD HH:MM:SS.mmm` (the zone comes from TZ). */
export function formatLocalTime(iso: string | undefined): string {
  if (iso === undefined) return '-';
  const date = new Date(iso);
  const pad = (value: number, width = 2): string => String(value).padStart(width, '0');
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`
  );
}

/** A byte count for people: `512 B`, `4.0 KiB`, `1.5 MiB`. */
export function formatBytes(sizeBytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = sizeBytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** `1 entry`, `2 entries`. */
export function plural(count: number, singular: string, pluralForm = `${singular}s`): string {
  return `${count} ${count === 1 ? singular : pluralForm}`;
}

/** How many items of a long list people see, unless `--verbose`. */
export const LISTED_AT_MOST = 10;

const MORE = '--verbose lists them all';

/**
 * A list for people, one line per item (`render` gives the line, indented by the caller): every
 * item with `isVerbose`, else the first {@link LISTED_AT_MOST}, then `  ... and 683 more`.
 */
export function listLines<Item>(
  items: readonly Item[],
  isVerbose: boolean | undefined,
  render: (item: Item) => string,
): string[] {
  const shown = isVerbose ? items : items.slice(0, LISTED_AT_MOST);
  const lines = shown.map(render);
  if (shown.length < items.length) {
    lines.push(`  ... and ${items.length - shown.length} more (${MORE})`);
  }
  return lines;
}

/** A list for people on one line: `a, b, c`, or the first few and `and 683 more`. */
export function listInline(items: readonly string[], isVerbose: boolean | undefined): string {
  if (isVerbose || items.length <= LISTED_AT_MOST) return items.join(', ');
  return `${items.slice(0, LISTED_AT_MOST).join(', ')} and ${items.length - LISTED_AT_MOST} more (${MORE})`;
}

/** Text in an ANSI colour (SGR code `on`), reset after (SGR code `off`). */
function sgr(on: number, off: number): (text: string) => string {
  return (text) => `\u001b[${on}m${text}\u001b[${off}m`;
}

const bold = sgr(1, 22);
const red = sgr(31, 39);
const green = sgr(32, 39);
const cyan = sgr(36, 39);

/**
 * A unified diff coloured as git does: file headers bold, hunk headers cyan, removed lines red,
 * added lines green. Lines are told apart by the hunk headers' counts, so a removed line that
 * reads `-- x` is not taken for a file header.
 */
export function colorDiff(text: string): string {
  let oldLeft = 0;
  let newLeft = 0;
  return text
    .split('\n')
    .map((line) => {
      if (oldLeft > 0 || newLeft > 0) {
        if (line.startsWith('-')) {
          oldLeft -= 1;
          return red(line);
        }
        if (line.startsWith('+')) {
          newLeft -= 1;
          return green(line);
        }
        if (line.startsWith(' ')) {
          oldLeft -= 1;
          newLeft -= 1;
          return line;
        }
        if (line.startsWith('\\')) return line;
      }
      const hunk = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(line);
      if (hunk) {
        oldLeft = Number(hunk[1] ?? 1);
        newLeft = Number(hunk[2] ?? 1);
        return cyan(line);
      }
      return line.startsWith('--- ') || line.startsWith('+++ ') ? bold(line) : line;
    })
    .join('\n');
}

/** How many items of a long list a `--json` document holds; its count says how many there are. */
export const MAX_JSON_LIST = 1000;

/** The lists of a document that can run long (a plan, the paths a command changed), and their counts. */
const COUNTED_LISTS: Readonly<Record<string, string>> = {
  changes: 'changeCount',
  conflicts: 'conflictCount',
  created: 'createdCount',
  modified: 'modifiedCount',
  deleted: 'deletedCount',
  removed: 'removedCount',
};

/**
 * A `--json` document with its long lists bounded: each list of {@link COUNTED_LISTS} at its top
 * level keeps its first {@link MAX_JSON_LIST} items and gains its count (`changeCount`...).
 */
export function boundLists(document: unknown): unknown {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) return document;
  const bounded: Record<string, unknown> = { ...document };
  for (const [key, countKey] of Object.entries(COUNTED_LISTS)) {
    const list = bounded[key];
    if (!Array.isArray(list)) continue;
    bounded[key] = list.slice(0, MAX_JSON_LIST);
    bounded[countKey] = list.length;
  }
  return bounded;
}
