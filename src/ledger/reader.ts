import type { FileHandle } from 'node:fs/promises';
import { RewindError } from '../errors.js';
import { openPlainFile, type UnreadableLine } from '../lib/index.js';
import { checkEnvelope, type LedgerEntry } from './entry.js';
import type { LedgerReading } from './ledger.js';

/**
 * Opens a ledger file to read it (or, with `append`, to append to it). Throws `LEDGER_CORRUPT`
 * when something other than a plain file is there (a directory, a link, a pipe: reading through
 * a link to a device would never end, and appending through one would write outside the store),
 * and what opening throws otherwise.
 */
export async function openLedgerFile(
  file: string,
  options: { append?: boolean } = {},
): Promise<FileHandle> {
  const opened = await openPlainFile(file, options);
  if (opened.isFile) return opened.value;
  throw new RewindError(
    'LEDGER_CORRUPT',
    `${file} is ${opened.kind}, not a ledger file: Rewind reads and writes no session through it. ` +
      'Move it out of the sessions directory, then retry.',
    { data: { file, kind: opened.kind } },
  );
}

/**
 * Bytes just before the parsed offset that must still be there on the next read: a file that was
 * rewritten rather than appended to (restored from a backup, edited by hand) differs there.
 */
const CHECKED_BYTES = 4096;
const NEWLINE = 0x0a;

/** What a reader has parsed: every complete line up to `offset`. */
interface Parsed {
  device: number;
  inode: number;
  /** Bytes parsed: the end of the last complete (newline-terminated) line. */
  offset: number;
  /** The bytes `[offset - checked.length, offset)` as they were read. */
  checked: Buffer;
  /** Complete lines seen, blank ones included (line numbers are 1-based). */
  lineCount: number;
  entries: LedgerEntry[];
  unreadable: UnreadableLine[];
  /** The last non-blank complete line, when it is not an entry. */
  lastLineUnreadable: UnreadableLine | undefined;
}

/** The bytes of an open file from `start` to `end` (fewer if it shrank meanwhile). */
async function readRange(handle: FileHandle, start: number, end: number): Promise<Buffer> {
  const bytes = Buffer.alloc(Math.max(0, end - start));
  let filled = 0;
  while (filled < bytes.length) {
    const { bytesRead } = await handle.read(bytes, filled, bytes.length - filled, start + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return bytes.subarray(0, filled);
}

/** One line, parsed as {@link readLedgerFile} parses it. */
type ParsedLine =
  | { type: 'blank' }
  | { type: 'entry'; entry: LedgerEntry }
  | { type: 'unreadable'; line: UnreadableLine };

function parseLine(text: string, line: number, offset: number, isTorn: boolean): ParsedLine {
  if (text.trim() === '') return { type: 'blank' };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { type: 'unreadable', line: { line, offset, text: text.slice(0, 200), isTorn, reason } };
  }
  const reason = checkEnvelope(value);
  if (reason === undefined) return { type: 'entry', entry: value as LedgerEntry };
  return {
    type: 'unreadable',
    line: {
      line,
      offset: -1,
      text: text.slice(0, 200),
      isTorn: false,
      reason: `not a ledger entry: ${reason}`,
    },
  };
}

/**
 * Reads one ledger file again and again, parsing only what was appended since the last read.
 * The file is append-only, so what was parsed stays valid as long as the file is the same one
 * (device and inode), has not shrunk, and still holds the bytes just before where the last read
 * stopped; otherwise the reader starts over. A torn final line is reported on every read and
 * parsed for good once a later append completes it. Each read gives exactly what
 * {@link readLedgerFile} would; until the reader starts over, its `entries` begin with the very
 * objects of the previous read's, so a caller can tell new entries from ones it has seen.
 */
export class LedgerReader {
  readonly file: string;
  #parsed: Parsed | undefined;

  constructor(file: string) {
    this.file = file;
  }

  /** Everything in the file now. Throws what opening or reading the file throws. */
  async read(): Promise<LedgerReading> {
    const handle = await openLedgerFile(this.file);
    try {
      const stats = await handle.stat();
      const parsed = this.#parsed;
      if (
        parsed &&
        parsed.device === stats.dev &&
        parsed.inode === stats.ino &&
        stats.size >= parsed.offset
      ) {
        const start = parsed.offset - parsed.checked.length;
        const content = await readRange(handle, start, stats.size);
        if (content.subarray(0, parsed.checked.length).equals(parsed.checked)) {
          return this.#parseFrom(parsed, content, start);
        }
      }
      // A first read, another file, a shorter one, or other bytes where the last read stopped.
      const content = await readRange(handle, 0, stats.size);
      return this.#parseFrom(this.#startOver(stats.dev, stats.ino), content, 0);
    } finally {
      await handle.close();
    }
  }

  #startOver(device: number, inode: number): Parsed {
    this.#parsed = {
      device,
      inode,
      offset: 0,
      checked: Buffer.alloc(0),
      lineCount: 0,
      entries: [],
      unreadable: [],
      lastLineUnreadable: undefined,
    };
    return this.#parsed;
  }

  /** Parses `content` (the file from byte `start`) past `parsed.offset`, and builds the reading. */
  #parseFrom(parsed: Parsed, content: Buffer, start: number): LedgerReading {
    let position = parsed.offset - start;
    // The complete lines are decoded in one call (a call per line took longer than parsing them
    // when a process opens a long session). UTF-8 never has a newline byte inside a character, so
    // each line decodes as it would alone; where there are as many characters as bytes, each
    // character is one byte, and a line's offset is counted in characters.
    const end = content.lastIndexOf(NEWLINE) + 1;
    const text = end > position ? content.toString('utf8', position, end) : '';
    const isOneBytePerCharacter = text.length === end - position;
    for (let at = 0; at < text.length; ) {
      const newline = text.indexOf('\n', at);
      parsed.lineCount += 1;
      const line = parseLine(text.slice(at, newline), parsed.lineCount, start + position, false);
      if (line.type === 'entry') {
        parsed.entries.push(line.entry);
        parsed.lastLineUnreadable = undefined;
      } else if (line.type === 'unreadable') {
        parsed.unreadable.push(line.line);
        parsed.lastLineUnreadable = line.line;
      }
      position = isOneBytePerCharacter
        ? position + newline + 1 - at
        : content.indexOf(NEWLINE, position) + 1;
      at = newline + 1;
    }
    if (start + position !== parsed.offset) {
      parsed.offset = start + position;
      parsed.checked = Buffer.from(
        content.subarray(Math.max(0, position - CHECKED_BYTES), position),
      );
    }
    // What follows the last newline is a torn write: reported, never kept as parsed.
    const rest = content.subarray(position);
    const torn =
      rest.length > 0
        ? parseLine(rest.toString('utf8'), parsed.lineCount + 1, start + position, true)
        : ({ type: 'blank' } as const);
    const entries = torn.type === 'entry' ? [...parsed.entries, torn.entry] : [...parsed.entries];
    const unreadable =
      torn.type === 'unreadable' ? [...parsed.unreadable, torn.line] : [...parsed.unreadable];
    const damagedLastLine =
      torn.type === 'blank'
        ? parsed.lastLineUnreadable
        : torn.type === 'unreadable' && !torn.line.isTorn
          ? torn.line
          : undefined;
    return { entries, unreadable, endsMidLine: rest.length > 0, damagedLastLine };
  }
}
