/**
 * What the stdio transport reads: stdin, one JSON-RPC message per line, with every other line
 * answered instead of dropped. The SDK's transport skips a line that is not JSON without a word,
 * so a client whose message was garbled would wait for an answer forever; JSON-RPC says to
 * answer it with a parse error (-32700), or an invalid request (-32600) for JSON that is not a
 * message.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { parseJSONRPCMessage, STDIO_DEFAULT_MAX_BUFFER_SIZE } from '@modelcontextprotocol/server';

/** A line that is not a message, and the JSON-RPC error that answers it. */
export interface RejectedLine {
  /** The error response to write back, as one line. */
  answer: string;
  /** Why, for a person (stderr). */
  reason: string;
}

function rejection(code: number, message: string, id: unknown = null): RejectedLine {
  const answerId = typeof id === 'string' || typeof id === 'number' ? id : null;
  return {
    answer: `${JSON.stringify({ jsonrpc: '2.0', id: answerId, error: { code, message } })}\n`,
    reason: message,
  };
}

/** Undefined for a JSON-RPC message the SDK accepts, else the error that answers the line. */
export function rejectionOf(line: string): RejectedLine | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    return rejection(-32700, `Parse error: the line is not JSON (${(error as Error).message}).`);
  }
  try {
    parseJSONRPCMessage(value);
    return undefined;
  } catch {
    const id = typeof value === 'object' && value !== null ? (value as { id?: unknown }).id : null;
    return rejection(
      -32600,
      'Invalid Request: the line is JSON but not a JSON-RPC 2.0 message.',
      id,
    );
  }
}

/**
 * Passes on the lines of `input` that are JSON-RPC messages and hands every other non-blank one
 * to `reject` (which answers it). A line longer than the SDK's buffer is rejected whole, without
 * being kept in memory.
 */
export function messageLines(reject: (rejected: RejectedLine) => void): Transform {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let isOverlong = false;
  const finishLine = (stream: Transform, line: Buffer) => {
    const text = line.toString('utf8').replace(/\r$/, '');
    if (text.trim() === '') return;
    const rejected = rejectionOf(text);
    if (rejected) reject(rejected);
    else stream.push(`${text}\n`);
  };
  return new Transform({
    transform(this: Transform, chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      let start = 0;
      for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
        const tail = chunk.subarray(start, end);
        if (isOverlong) isOverlong = false;
        else finishLine(this, Buffer.concat([...pending, tail]));
        pending = [];
        pendingBytes = 0;
        start = end + 1;
      }
      const rest = chunk.subarray(start);
      if (!isOverlong && rest.length > 0) {
        pending.push(rest);
        pendingBytes += rest.length;
        if (pendingBytes > STDIO_DEFAULT_MAX_BUFFER_SIZE) {
          reject(
            rejection(
              -32700,
              `Parse error: a line longer than ${STDIO_DEFAULT_MAX_BUFFER_SIZE} bytes; it is skipped.`,
            ),
          );
          pending = [];
          pendingBytes = 0;
          isOverlong = true;
        }
      }
      done();
    },
    flush(this: Transform, done: TransformCallback) {
      if (!isOverlong && pendingBytes > 0) finishLine(this, Buffer.concat(pending));
      done();
    },
  });
}
