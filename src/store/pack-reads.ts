import type { Worker } from 'node:worker_threads';
import { DIGEST_PREFIX, workerThreads } from '../lib/index.js';
import { joined } from './compress.js';
import type { PackLocation } from './packs.js';

/**
 * Packed objects read on another thread. A rollback of many files asks for their contents a few
 * at a time ahead of writing them (`readAhead`); read here, each costs the thread that writes the
 * files an open, a read and a close of its pack, an inflate and a hash (~70 µs: a fifth of a
 * rollback of 1,000 small files). Asked for together, they are read by a worker meanwhile, on the
 * core the writing leaves idle.
 *
 * The worker is only a faster way to the same bytes: it answers each read with the object's
 * bytes, checked against the digest, or with nothing, and anything it could not read soundly (a
 * pack gone, damaged bytes, a worker that failed or has not started yet) is read here, by the
 * path that says what is wrong. Reads asked for in one turn of the event loop go as one job.
 */

/** Fewer reads than this, asked for together, are done here: a round trip costs more. */
const ELSEWHERE_MIN_READS = 4;

/**
 * The worker starts when this many reads are asked for together (a restore of a few dozen files
 * or more; `readAhead` asks for 16 at a time): starting it costs ~30 ms of the other core, which
 * a restore of a few files would not win back. Until it runs, reads are done here.
 */
const START_MIN_READS = 16;

// A job's answer is one buffer, moved rather than copied (see compress.ts), and the reads that
// failed. Each pack is opened once per job, never through a link nor waiting on a pipe, as
// `PackSet` reads it.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { closeSync, constants, fstatSync, openSync, readSync } = require('node:fs');
const { inflateRawSync } = require('node:zlib');
const { createHash } = require('node:crypto');
const FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
function readOne({ pack, offset, storedBytes, sizeBytes, hex }, descriptors) {
  let descriptor = descriptors.get(pack);
  if (descriptor === undefined) {
    try {
      descriptor = openSync(pack, FLAGS);
      if (!fstatSync(descriptor).isFile()) {
        closeSync(descriptor);
        descriptor = -1;
      }
    } catch {
      descriptor = -1;
    }
    descriptors.set(pack, descriptor);
  }
  if (descriptor === -1) return undefined;
  const stored = Buffer.allocUnsafe(storedBytes);
  let done = 0;
  while (done < storedBytes) {
    const read = readSync(descriptor, stored, done, storedBytes - done, offset + done);
    if (read === 0) return undefined;
    done += read;
  }
  const bytes = storedBytes >= sizeBytes
    ? stored
    : inflateRawSync(stored, { maxOutputLength: sizeBytes });
  if (bytes.length !== sizeBytes) return undefined;
  return createHash('sha256').update(bytes).digest('hex') === hex ? bytes : undefined;
}
parentPort.on('message', ({ id, reads }) => {
  const descriptors = new Map();
  const outputs = [];
  const failed = [];
  for (const [index, read] of reads.entries()) {
    let bytes;
    try {
      bytes = readOne(read, descriptors);
    } catch {}
    if (bytes === undefined) failed.push(index);
    outputs.push(bytes ?? Buffer.alloc(0));
  }
  for (const descriptor of descriptors.values()) if (descriptor !== -1) closeSync(descriptor);
  const { buffer, ends } = ${joined}(outputs);
  parentPort.postMessage({ id, buffer, ends, failed }, [buffer]);
});
`;

/** A read asked for, and who waits for it. */
interface Read {
  location: PackLocation;
  resolve: (bytes: Buffer | undefined) => void;
}

interface Reader {
  worker: Worker;
  /** False until the worker runs: reads asked for before are done here. */
  online: boolean;
  next: number;
  /** The jobs sent and not answered, by id. */
  sent: Map<number, Read[]>;
}

let reader: Reader | undefined;
let asked: Read[] = [];
let readElsewhere = 0;

function startReader(): Reader | undefined {
  try {
    const worker = new (workerThreads().Worker)(WORKER_SOURCE, { eval: true });
    const started: Reader = { worker, online: false, next: 0, sent: new Map() };
    const fail = (): void => {
      if (reader === started) reader = undefined;
      const lost = [...started.sent.values()];
      started.sent.clear();
      worker.unref();
      for (const reads of lost) for (const read of reads) read.resolve(undefined);
    };
    worker.on('online', () => {
      started.online = true;
    });
    worker.on('message', ({ id, buffer, ends, failed }) => {
      const reads = started.sent.get(id);
      started.sent.delete(id);
      if (started.sent.size === 0) worker.unref();
      if (reads === undefined) return;
      const unread = new Set(failed as number[]);
      let start = 0;
      (ends as number[]).forEach((end, index) => {
        const read = reads[index] as Read;
        if (unread.has(index)) {
          read.resolve(undefined);
        } else {
          readElsewhere += 1;
          read.resolve(Buffer.from(buffer as ArrayBuffer, start, end - start));
        }
        start = end;
      });
    });
    worker.on('error', fail);
    worker.on('exit', fail);
    // Never keeps the process alive: a process that is done exits, and what it waited for is
    // read here (see `fail`). Only after the listeners: a 'message' listener added to an unref'd
    // worker refs its port again (nodejs/node#53036), and a worker started but never sent a
    // read (it was not yet online) kept a finished command from exiting.
    worker.unref();
    return started;
  } catch {
    return undefined;
  }
}

/** Sends the reads asked for in this turn to the worker, or leaves them to be done here. */
function send(): void {
  const reads = asked;
  asked = [];
  if (reads.length >= START_MIN_READS) reader ??= startReader();
  const current = reader;
  if (reads.length < ELSEWHERE_MIN_READS || !current?.online) {
    for (const read of reads) read.resolve(undefined);
    return;
  }
  const id = current.next++;
  current.sent.set(id, reads);
  current.worker.ref();
  current.worker.postMessage({
    id,
    reads: reads.map(({ location: { pack, offset, storedBytes, sizeBytes, digest } }) => ({
      pack,
      offset,
      storedBytes,
      sizeBytes,
      hex: digest.slice(DIGEST_PREFIX.length),
    })),
  });
}

/**
 * The packed object at `location`, read by the worker with the others asked for in this turn of
 * the event loop and checked against its digest; undefined when it is to be read here (too few
 * reads asked for together, no worker running yet, or not read soundly there).
 */
export function readPackedElsewhere(location: PackLocation): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    asked.push({ location, resolve });
    if (asked.length === 1) queueMicrotask(send);
  });
}

/** How many objects the worker has read in this process (for tests). */
export function packedReadsElsewhere(): number {
  return readElsewhere;
}
