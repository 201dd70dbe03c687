import type { Worker } from 'node:worker_threads';
import { nodeZlib, workerThreads } from '../lib/index.js';

/** Objects smaller than this are stored as they are: compressing them does not pay. */
const COMPRESS_MIN_BYTES = 256;

/** Raw DEFLATE at the fastest level, as git compresses its loose objects. */
const LEVEL = 1;

/**
 * An object's bytes as a pack stores them, given their DEFLATE form (or none): the compressed
 * bytes where they save an eighth or more, else the bytes as they are.
 */
function chosen(bytes: Uint8Array, deflated: Uint8Array | undefined): Uint8Array {
  return deflated && deflated.byteLength <= bytes.byteLength - bytes.byteLength / 8
    ? deflated
    : bytes;
}

/**
 * The smallest window that holds the whole object (2^9 to 2^15 bytes): it finds the matches the
 * largest finds (all but those farther back than the window less 262 bytes) and costs zlib half
 * the set-up for a small object (27 against 50 µs for 6 kB). Inflating needs no hint: a stream
 * made with a smaller window inflates with the default one.
 */
function windowBitsOf(size: number): number {
  return Math.min(15, Math.max(9, Math.ceil(Math.log2(size))));
}

/** An object's bytes as a pack stores them, compressed here and now. */
export function compressed(bytes: Uint8Array): Uint8Array {
  if (bytes.byteLength < COMPRESS_MIN_BYTES) return bytes;
  return chosen(
    bytes,
    nodeZlib().deflateRawSync(bytes, { level: LEVEL, windowBits: windowBitsOf(bytes.byteLength) }),
  );
}

/** Many objects in one buffer, and where each ends in it. */
function joined(objects: readonly Uint8Array[]): { buffer: ArrayBuffer; ends: number[] } {
  let size = 0;
  for (const bytes of objects) size += bytes.byteLength;
  const buffer = new ArrayBuffer(size);
  const view = new Uint8Array(buffer);
  const ends: number[] = [];
  let at = 0;
  for (const bytes of objects) {
    view.set(bytes, at);
    at += bytes.byteLength;
    ends.push(at);
  }
  return { buffer, ends };
}

// The worker only deflates; which form is kept is decided here, by `chosen`. Objects go to it
// and come back in one buffer each way, moved rather than copied: cloning a message of many small
// buffers cost the sending thread a millisecond or more per few hundred kilobytes, a tenth of a
// checkpoint of 1,000 files. `ends[i]` is where object i ends in its buffer; an object the
// worker left as it is ends where the one before it does.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { deflateRawSync } = require('node:zlib');
${windowBitsOf}
parentPort.on('message', ({ id, buffer, ends }) => {
  try {
    const outputs = [];
    let start = 0;
    for (const end of ends) {
      const bytes = new Uint8Array(buffer, start, end - start);
      start = end;
      outputs.push(bytes.byteLength < ${COMPRESS_MIN_BYTES}
        ? new Uint8Array(0)
        : deflateRawSync(bytes, { level: ${LEVEL}, windowBits: windowBitsOf(bytes.byteLength) }));
    }
    const { buffer: out, ends: outEnds } = ${joined}(outputs);
    parentPort.postMessage({ id, buffer: out, ends: outEnds }, [out]);
  } catch (error) {
    parentPort.postMessage({ id, error: String(error) });
  }
});
`;

interface Compressor {
  worker: Worker;
  next: number;
  waiting: Map<number, (out: (Uint8Array | undefined)[] | undefined) => void>;
}

let compressor: Compressor | undefined;

function startCompressor(): Compressor | undefined {
  try {
    const worker = new (workerThreads().Worker)(WORKER_SOURCE, { eval: true });
    // Never keeps the process alive: a process that is done exits, and what it waited for
    // falls back to compressing here (see `compressedElsewhere`).
    worker.unref();
    const started: Compressor = { worker, next: 0, waiting: new Map() };
    const fail = (): void => {
      if (compressor === started) compressor = undefined;
      for (const resolve of started.waiting.values()) resolve(undefined);
      started.waiting.clear();
    };
    worker.on('message', ({ id, buffer, ends, error }) => {
      const resolve = started.waiting.get(id);
      started.waiting.delete(id);
      if (error !== undefined) return resolve?.(undefined);
      let start = 0;
      resolve?.(
        (ends as number[]).map((end) => {
          const out = end > start ? new Uint8Array(buffer, start, end - start) : undefined;
          start = end;
          return out;
        }),
      );
    });
    worker.on('error', fail);
    worker.on('exit', fail);
    return started;
  } catch {
    return undefined;
  }
}

/**
 * The stored forms of many objects, compressed on another thread (a worker started on first
 * use) while this one goes on: for the large batches of a first snapshot, where compressing
 * costs as much as reading and hashing. Falls back to compressing here if the worker fails.
 */
export async function compressedElsewhere(objects: Uint8Array[]): Promise<Uint8Array[]> {
  compressor ??= startCompressor();
  const current = compressor;
  let out: (Uint8Array | undefined)[] | undefined;
  if (current) {
    out = await new Promise((resolve) => {
      const id = current.next++;
      current.waiting.set(id, resolve);
      current.worker.ref();
      const { buffer, ends } = joined(objects);
      current.worker.postMessage({ id, buffer, ends }, [buffer]);
    });
    if (current.waiting.size === 0) current.worker.unref();
  }
  if (!out) return objects.map(compressed);
  return objects.map((bytes, index) => chosen(bytes, out[index]));
}
