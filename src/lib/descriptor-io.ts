// Whole reads and writes through an open descriptor, with synchronous calls (a read or a write
// may do part of what was asked: these go on until it is done, or the file ends).
import { readSync, writeSync } from 'node:fs';

/** Reads `length` bytes at `position`, or fewer when the file ends first. */
export function readAt(descriptor: number, length: number, position: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const read = readSync(descriptor, buffer, done, length - done, position + done);
    if (read === 0) break;
    done += read;
  }
  return done === length ? buffer : buffer.subarray(0, done);
}

/** Writes all of `bytes` at the descriptor's position. */
export function writeAll(descriptor: number, bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.byteLength) {
    written += writeSync(descriptor, bytes, written, bytes.byteLength - written);
  }
}
