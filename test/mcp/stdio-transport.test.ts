// The stdio transport of `rewind mcp` on streams of the test's own: a reader that is slow.
import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AnsweringStdioTransport } from '../../src/mcp/stdio.js';

describe('AnsweringStdioTransport', () => {
  it('holds the answers a slow reader has not taken yet without a listener for each', async () => {
    const written: string[] = [];
    const pending: (() => void)[] = [];
    // A pipe whose reader takes nothing until told: each write waits.
    const output = new Writable({
      highWaterMark: 16,
      write(chunk: Buffer, _encoding, done) {
        written.push(chunk.toString());
        pending.push(done);
      },
    });
    const transport = new AnsweringStdioTransport(new PassThrough(), output);
    await transport.start();
    const sent = Array.from({ length: 30 }, (_, id) =>
      transport.send({ jsonrpc: '2.0', id, result: {} }),
    );
    // Node warns of a leak past 10 listeners of one event (MaxListenersExceededWarning on stderr).
    expect(output.listenerCount('drain')).toBeLessThanOrEqual(1);
    expect(output.listenerCount('error')).toBeLessThanOrEqual(2);
    // The reader catches up: every answer is written, in order.
    while (written.length < 30 || pending.length > 0) {
      pending.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(sent);
    expect(written.map((line) => JSON.parse(line).id)).toEqual(
      Array.from({ length: 30 }, (_, id) => id),
    );
  });
});
