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

/**
 * Many objects in one buffer, and where each ends in it. Also run in workers (as source text: it
 * uses nothing but globals).
 */
export function joined(objects: readonly Uint8Array[]): { buffer: ArrayBuffer; ends: number[] } {
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

/**
 * Who compresses each job sent to the worker, by `id % CLAIM_SLOTS`: 0 nobody yet, 1 the worker,
 * 2 this thread. Whoever claims a job first (an atomic exchange) does it; the other leaves it.
 */
const CLAIM_SLOTS = 1 << 16;
const UNCLAIMED = 0;
const BY_WORKER = 1;
const BY_THIS_THREAD = 2;

// The worker only deflates; which form is kept is decided here, by `chosen`. Objects go to it
// and come back in one buffer each way, moved rather than copied: cloning a message of many small
// buffers cost the sending thread a millisecond or more per few hundred kilobytes, a tenth of a
// checkpoint of 1,000 files. `ends[i]` is where object i ends in its buffer; an object the
// worker left as it is ends where the one before it does. A job this thread claimed first (see
// `compressWaitingHere`) is answered as skipped.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { deflateRawSync } = require('node:zlib');
const claims = new Int32Array(workerData.claims);
${windowBitsOf}
parentPort.on('message', ({ id, buffer, ends }) => {
  if (Atomics.compareExchange(claims, id % ${CLAIM_SLOTS}, ${UNCLAIMED}, ${BY_WORKER}) !== ${UNCLAIMED}) {
    parentPort.postMessage({ id, skipped: true });
    return;
  }
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

/** Objects to compress elsewhere, and who waits for their stored forms. */
interface Job {
  id: number;
  objects: Uint8Array[];
  resolve: (stored: Uint8Array[]) => void;
}

interface Compressor {
  worker: Worker;
  claims: Int32Array;
  next: number;
  /** The jobs sent and not answered, by id, oldest first. */
  sent: Map<number, Job>;
}

let compressor: Compressor | undefined;

/** A job done on this thread: what the worker would have made, compressed here. */
function compressHere(job: Job): void {
  job.resolve(job.objects.map(compressed));
}

function startCompressor(): Compressor | undefined {
  try {
    const claims = new Int32Array(new SharedArrayBuffer(CLAIM_SLOTS * 4));
    const worker = new (workerThreads().Worker)(WORKER_SOURCE, {
      eval: true,
      workerData: { claims: claims.buffer },
    });
    const started: Compressor = { worker, claims, next: 0, sent: new Map() };
    const fail = (): void => {
      if (compressor === started) compressor = undefined;
      const lost = [...started.sent.values()];
      started.sent.clear();
      worker.unref();
      for (const job of lost) {
        // Those this thread claimed it has resolved already.
        if (Atomics.load(claims, job.id % CLAIM_SLOTS) !== BY_THIS_THREAD) compressHere(job);
      }
    };
    worker.on('message', ({ id, buffer, ends, error, skipped }) => {
      const job = started.sent.get(id);
      started.sent.delete(id);
      if (started.sent.size === 0) worker.unref();
      // Skipped: this thread claimed it, and has resolved it already.
      if (job === undefined || skipped) return;
      if (error !== undefined) {
        compressHere(job);
        return;
      }
      let start = 0;
      job.resolve(
        (ends as number[]).map((end, index) => {
          const out = end > start ? new Uint8Array(buffer, start, end - start) : undefined;
          start = end;
          return chosen(job.objects[index] as Uint8Array, out);
        }),
      );
    });
    worker.on('error', fail);
    worker.on('exit', fail);
    // Never keeps the process alive: a process that is done exits, and what it waited for
    // falls back to compressing here (see `compressedElsewhere`). Only after the listeners,
    // which would ref the worker's port again (see pack-reads.ts).
    worker.unref();
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
export function compressedElsewhere(objects: Uint8Array[]): Promise<Uint8Array[]> {
  return new Promise((resolve) => {
    compressor ??= startCompressor();
    const current = compressor;
    if (!current) {
      resolve(objects.map(compressed));
      return;
    }
    const job: Job = { id: current.next++, objects, resolve };
    Atomics.store(current.claims, job.id % CLAIM_SLOTS, UNCLAIMED);
    current.sent.set(job.id, job);
    current.worker.ref();
    const { buffer, ends } = joined(objects);
    current.worker.postMessage({ id: job.id, buffer, ends }, [buffer]);
  });
}

/**
 * Compresses here the jobs sent to the worker that it has not begun, newest first (it takes
 * the oldest), letting its answers in between: for a thread that would otherwise wait for them
 * (a batch's commit), so that both threads finish what is left.
 */
export async function compressWaitingHere(): Promise<void> {
  const current = compressor;
  if (!current) return;
  for (const job of [...current.sent.values()].reverse()) {
    const claimed = Atomics.compareExchange(
      current.claims,
      job.id % CLAIM_SLOTS,
      UNCLAIMED,
      BY_THIS_THREAD,
    );
    // The worker takes them in order: it has begun every older one too.
    if (claimed === BY_WORKER) return;
    // Taken here already (by another batch's commit): done, or being done.
    if (claimed === BY_THIS_THREAD) continue;
    compressHere(job);
    await new Promise((next) => setImmediate(next));
  }
}
