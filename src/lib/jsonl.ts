/** One line of a JSON-lines file that could not be parsed. */
export interface UnreadableLine {
  /** 1-based line number in the file. */
  line: number;
  /** Byte offset of the line's first byte. */
  offset: number;
  /** The raw text, cut to 200 characters. */
  text: string;
  /** True when this is the last line and the file does not end with a newline: a torn write. */
  isTorn: boolean;
  /** Why it could not be parsed. */
  reason: string;
}

/** A parsed JSON-lines document. */
export interface JsonLines {
  /** Each parsed value with its 1-based line number and the exact text of its line. */
  records: { line: number; value: unknown; text: string }[];
  /** Lines that did not parse; a torn final line is reported here, never thrown. */
  unreadable: UnreadableLine[];
  /** True when the content ends without a newline, so the next append must start a fresh line. */
  endsMidLine: boolean;
}

/**
 * Parses JSON-lines content. Blank lines are skipped; a line that is not JSON is reported in
 * `unreadable` (a final line with no newline after it is marked `isTorn`, the trace of a crash
 * during a write), never thrown, so one bad line cannot make a whole file unreadable. Given the
 * raw bytes, offsets are exact even where a line is not valid UTF-8.
 */
export function parseJsonLines(content: string | Uint8Array): JsonLines {
  const bytes = typeof content === 'string' ? Buffer.from(content) : Buffer.from(content);
  const result: JsonLines = { records: [], unreadable: [], endsMidLine: false };
  if (bytes.length === 0) return result;
  result.endsMidLine = bytes[bytes.length - 1] !== 0x0a;
  let line = 0;
  for (let start = 0; start < bytes.length; ) {
    const newline = bytes.indexOf(0x0a, start);
    const end = newline === -1 ? bytes.length : newline;
    const text = bytes.toString('utf8', start, end);
    line += 1;
    if (text.trim() !== '') {
      try {
        result.records.push({ line, value: JSON.parse(text), text });
      } catch (error) {
        result.unreadable.push({
          line,
          offset: start,
          text: text.slice(0, 200),
          isTorn: newline === -1,
          reason: error instanceof Error ? error.message : String(error),
        });
      }
    }
    start = end + 1;
  }
  return result;
}
