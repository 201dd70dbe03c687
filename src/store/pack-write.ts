// Writing a pack and its index, in the format of SPEC.md §3a (read by packs.ts).
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { isSystemError } from '../errors.js';
import { type Digest, nodeCrypto, writeAll } from '../lib/index.js';
import { compressed } from './compress.js';
import { newIndex, sealIndex, setRecord } from './pack-index.js';

const PACK_MAGIC = Buffer.from('RWPACK\0\x01', 'latin1');

/** What a write names its files before they are renamed into place. */
export const TEMPORARY_PREFIX = '.tmp-';

const WRITE_RUN_BYTES = 1024 * 1024;

/**
 * An object to write into a pack: its bytes; or, copied from another pack, the form stored there
 * and its size, or how to get them when it is written (a merge reads one object at a time).
 */
export type PackInput = { digest: Digest } & (
  | {
      bytes: Uint8Array;
      /** The bytes to store for it, when they were compressed already (see compress.ts). */
      stored?: Uint8Array;
    }
  | { bytes?: undefined; stored: Uint8Array; sizeBytes: number }
  | { bytes?: undefined; stored: () => { stored: Uint8Array; sizeBytes: number } }
);

/**
 * Writes objects into a new pack and its index in `directory` (temporary names, then renamed: the
 * pack first, so that an index is never there without its pack). With `sync`, both are fsynced
 * before the renames; otherwise the caller makes the returned files durable. Either way the
 * caller syncs the returned directories. Returns the pack's name, its index as written, its two
 * files, and those directories.
 */
export function writePackFiles(
  directory: string,
  objects: Iterable<PackInput>,
  options: { sync: boolean },
): { name: string; index: Buffer; files: string[]; directories: string[] } {
  const sorted = [...new Map([...objects].map((object) => [object.digest, object])).values()].sort(
    (a, b) => (a.digest < b.digest ? -1 : 1),
  );
  const directories = [directory];
  try {
    mkdirSync(directory);
    directories.push(join(directory, '..'));
  } catch (error) {
    if (!isSystemError(error, 'EEXIST')) throw error;
  }
  const suffix = `${process.pid}-${nodeCrypto().randomBytes(8).toString('hex')}`;
  const temporaryPack = join(directory, `${TEMPORARY_PREFIX}${suffix}.pack`);
  const temporaryIndex = join(directory, `${TEMPORARY_PREFIX}${suffix}.idx`);
  const index = newIndex(sorted.length);
  try {
    const pack = openSync(temporaryPack, 'wx', 0o444);
    try {
      // Written in runs of about a megabyte: one system call each, not one per object.
      let run: Uint8Array[] = [PACK_MAGIC];
      let runBytes = PACK_MAGIC.length;
      const flush = (): void => {
        writeAll(pack, run.length === 1 ? (run[0] as Uint8Array) : Buffer.concat(run));
        run = [];
        runBytes = 0;
      };
      let offset = PACK_MAGIC.length;
      let place = 0;
      for (const object of sorted) {
        const { digest } = object;
        let stored: Uint8Array;
        let sizeBytes: number;
        if (object.bytes !== undefined) {
          stored = object.stored ?? compressed(object.bytes);
          sizeBytes = object.bytes.byteLength;
        } else {
          ({ stored, sizeBytes } = 'sizeBytes' in object ? object : object.stored());
        }
        if (runBytes + stored.byteLength > WRITE_RUN_BYTES && runBytes > 0) flush();
        run.push(stored);
        runBytes += stored.byteLength;
        setRecord(index, place++, digest, offset, stored.byteLength, sizeBytes);
        offset += stored.byteLength;
      }
      if (runBytes > 0) flush();
      if (options.sync) fsyncSync(pack);
    } finally {
      closeSync(pack);
    }
    const name = sealIndex(index);
    const indexFile = openSync(temporaryIndex, 'wx', 0o444);
    try {
      writeAll(indexFile, index);
      if (options.sync) fsyncSync(indexFile);
    } finally {
      closeSync(indexFile);
    }
    const packFile = join(directory, `${name}.pack`);
    const indexPath = join(directory, `${name}.idx`);
    renameSync(temporaryPack, packFile);
    renameSync(temporaryIndex, indexPath);
    return { name, index, files: [packFile, indexPath], directories };
  } catch (error) {
    for (const file of [temporaryPack, temporaryIndex]) {
      try {
        unlinkSync(file);
      } catch {}
    }
    throw error;
  }
}
