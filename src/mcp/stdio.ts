/**
 * What the stdio transport reads: stdin, one JSON-RPC message per line, with every other line
 * answered instead of dropped. The SDK's transport skips a line that is not JSON without a word,
 * so a client whose message was garbled would wait for an answer forever; JSON-RPC says to
 * answer it with a parse error (-32700), or an invalid request (-32600) for JSON that is not a
 * message.
 */
import { once } from 'node:events';
import { type Readable, Transform, type TransformCallback, type Writable } from 'node:stream';
import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  parseJSONRPCMessage,
  ReadBuffer,
  type RequestId,
  STDIO_DEFAULT_MAX_BUFFER_SIZE,
  serializeMessage,
  type Transport,
} from '@modelcontextprotocol/server';

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
function rejectionOf(line: string): RejectedLine | undefined {
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

/**
 * The stdio transport of `rewind mcp`: messages read from `input` (one per line, as
 * {@link messageLines} passes them on), answers written to `output`. Unlike the SDK's
 * StdioServerTransport, which closes as soon as its input ends and drops the answers of the
 * calls still running, it closes once the input ended and every request it read was answered
 * (or cancelled by the client): `printf '...' | rewind mcp` gets an answer to each request.
 */
export class AnsweringStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];
  /** Resolves once the transport closed: the input ended with nothing left to answer. */
  readonly closed: Promise<void>;
  // messageLines keeps each line within the SDK's limit already (a line of exactly the limit
  // comes with its newline, one byte over).
  private readonly buffer = new ReadBuffer({ maxBufferSize: Number.POSITIVE_INFINITY });
  private readonly unanswered = new Set<RequestId>();
  private isEnded = false;
  private isClosed = false;
  private wasClosed: () => void = () => {};
  /**
   * Resolves once the output drained, for every answer that waits on it: a listener each would
   * pass Node's limit of ten (a MaxListenersExceededWarning on stderr) when a reader is slow.
   */
  private drained: Promise<void> | undefined;

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
  ) {
    this.closed = new Promise((done) => {
      this.wasClosed = done;
    });
  }

  async start(): Promise<void> {
    this.input.on('data', this.read);
    this.input.on('end', this.ended);
    this.input.on('close', this.ended);
    this.output.on('error', this.failed);
  }

  private readonly read = (chunk: Buffer): void => {
    this.buffer.append(chunk);
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        this.onerror?.(error as Error);
        continue;
      }
      if (message === null) return;
      if (isJSONRPCRequest(message)) this.unanswered.add(message.id);
      // A cancelled request is not answered (the MCP spec says so): nothing left to wait for.
      const cancelled = cancelledRequestOf(message);
      if (cancelled !== undefined) this.unanswered.delete(cancelled);
      this.onmessage?.(message);
    }
  };

  private readonly ended = (): void => {
    this.isEnded = true;
    this.closeIfDone();
  };

  private readonly failed = (error: Error): void => {
    if (this.isClosed) return;
    this.onerror?.(error);
    void this.close();
  };

  private closeIfDone(): void {
    if (this.isEnded && this.unanswered.size === 0) void this.close();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.isClosed) throw new Error('The stdio transport is closed.');
    const json = serializeMessage(message);
    if (!this.output.write(json)) {
      this.drained ??= once(this.output, 'drain').then(() => {
        this.drained = undefined;
      });
      await this.drained;
    }
    if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
      if (message.id !== undefined) this.unanswered.delete(message.id);
      this.closeIfDone();
    }
  }

  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.input.off('data', this.read);
    this.input.off('end', this.ended);
    this.input.off('close', this.ended);
    this.buffer.clear();
    this.onclose?.();
    this.wasClosed();
  }
}

/** The id of the request a `notifications/cancelled` message cancels, if it is one. */
function cancelledRequestOf(message: JSONRPCMessage): RequestId | undefined {
  if (!isJSONRPCNotification(message) || message.method !== 'notifications/cancelled') {
    return undefined;
  }
  const id = (message.params as { requestId?: unknown } | undefined)?.requestId;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}
