// Whole reads and writes through an open descriptor, with synchronous calls (a read or a write
// may do part of what was asked: these go on until it is done, or the file ends).
import { readSync, writeSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

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

/**
 * Writes all of `bytes` (from `offset`, `length` of them) through `handle`, at `position`, or
 * at the file's position when it is undefined. A write may do part of what was asked (a disk
 * nearly full writes what fits, and a later write may find room again): this goes on until all
 * is written, or a write fails. One write that does nothing fails with EIO, never loops.
 */
export async function writeAllTo(
  handle: FileHandle,
  bytes: Uint8Array,
  offset = 0,
  length = bytes.byteLength - offset,
  position?: number,
): Promise<void> {
  let written = 0;
  while (written < length) {
    const { bytesWritten } = await handle.write(
      bytes,
      offset + written,
      length - written,
      position === undefined ? null : position + written,
    );
    if (bytesWritten === 0) {
      throw Object.assign(new Error(`EIO: a write of ${length - written} bytes wrote nothing`), {
        code: 'EIO',
      });
    }
    written += bytesWritten;
  }
}
