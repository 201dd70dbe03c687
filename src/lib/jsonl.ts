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
 * during a write), never thrown, so one bad line cannot make a whole file unreadable.
 */
export function parseJsonLines(content: string): JsonLines {
  const result: JsonLines = { records: [], unreadable: [], endsMidLine: false };
  if (content.length === 0) return result;
  result.endsMidLine = !content.endsWith('\n');
  const lines = content.split('\n');
  if (!result.endsMidLine) lines.pop();
  let offset = 0;
  lines.forEach((text, index) => {
    const line = index + 1;
    const lineOffset = offset;
    offset += Buffer.byteLength(text) + 1;
    if (text.trim() === '') return;
    try {
      result.records.push({ line, value: JSON.parse(text), text });
    } catch (error) {
      result.unreadable.push({
        line,
        offset: lineOffset,
        text: text.slice(0, 200),
        isTorn: result.endsMidLine && index === lines.length - 1,
        reason: error instanceof Error ? error.message : String(error),
      });
    }
  });
  return result;
}
