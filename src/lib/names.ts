import { readdirSync, readlinkSync } from 'node:fs';

// File names on Linux are bytes, not text: any byte but `/` and NUL. Rewind keeps paths as
// strings (in trees, the ledger, JSON and the API), so a name that is not valid UTF-8 is decoded
// the way Python's `surrogateescape` does: every byte that is not part of a valid UTF-8 sequence
// becomes the lone surrogate U+DC80..U+DCFF of the same low byte. Valid UTF-8 never decodes to a
// lone surrogate, so the mapping is one-to-one and every name round-trips to its exact bytes.
// JSON writes lone surrogates as `\udcXX` escapes, so trees and ledger lines stay valid UTF-8.

/** Matches a lone surrogate standing for a byte (the `u` flag keeps surrogate pairs whole). */
const ESCAPED_BYTE = /[\uDC80-\uDCFF]/u;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The length of the valid UTF-8 sequence starting at `index`, or 0 when it is not one. */
function sequenceLength(bytes: Uint8Array, index: number): number {
  const lead = bytes[index] as number;
  if (lead < 0x80) return 1;
  const isContinuation = (offset: number, low = 0x80, high = 0xbf): boolean => {
    const byte = bytes[index + offset];
    return byte !== undefined && byte >= low && byte <= high;
  };
  if (lead >= 0xc2 && lead <= 0xdf) return isContinuation(1) ? 2 : 0;
  if (lead >= 0xe0 && lead <= 0xef) {
    const low = lead === 0xe0 ? 0xa0 : 0x80;
    const high = lead === 0xed ? 0x9f : 0xbf; // ED A0..BF would encode a surrogate
    return isContinuation(1, low, high) && isContinuation(2) ? 3 : 0;
  }
  if (lead >= 0xf0 && lead <= 0xf4) {
    const low = lead === 0xf0 ? 0x90 : 0x80;
    const high = lead === 0xf4 ? 0x8f : 0xbf;
    return isContinuation(1, low, high) && isContinuation(2) && isContinuation(3) ? 4 : 0;
  }
  return 0;
}

/** A name (or path) read from the disk as bytes, as Rewind writes it: see the note above. */
export function decodeName(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    let text = '';
    let index = 0;
    while (index < bytes.length) {
      const length = sequenceLength(bytes, index);
      if (length === 0) {
        text += String.fromCharCode(0xdc00 + (bytes[index] as number));
        index += 1;
      } else {
        text += Buffer.from(bytes.subarray(index, index + length)).toString('utf8');
        index += length;
      }
    }
    return text;
  }
}

/** The exact bytes of a name or path that {@link decodeName} produced. */
export function nameBytes(name: string): Buffer {
  if (!ESCAPED_BYTE.test(name)) return Buffer.from(name, 'utf8');
  const parts: Buffer[] = [];
  for (const character of name) {
    const code = character.codePointAt(0) as number;
    parts.push(
      code >= 0xdc80 && code <= 0xdcff
        ? Buffer.from([code - 0xdc00])
        : Buffer.from(character, 'utf8'),
    );
  }
  return Buffer.concat(parts);
}

/**
 * The path to hand to `node:fs` for a path that may hold names that are not UTF-8: the string
 * itself when it has none (the common case, at no cost), else its exact bytes.
 */
export function diskPath(path: string): string | Buffer {
  return ESCAPED_BYTE.test(path) ? nameBytes(path) : path;
}

/** Whether a name or path holds bytes that are not valid UTF-8 (see {@link decodeName}). */
export function hasEscapedBytes(path: string): boolean {
  return ESCAPED_BYTE.test(path);
}

/**
 * The names in a directory, each exactly as on disk. Read as UTF-8 first; only a directory where
 * a name came back with a replacement character (U+FFFD) is read again as bytes.
 */
export function readNamesSync(directory: string): string[] {
  const names = readdirSync(diskPath(directory));
  if (!names.some((name) => name.includes('\uFFFD'))) return names;
  return readdirSync(diskPath(directory), { encoding: 'buffer' }).map(decodeName);
}

/**
 * The entries of a directory, each name exactly as on disk (as {@link readNamesSync} reads
 * them), with whether it is a directory.
 */
export function listNames(directory: string | Buffer): { name: string; isDirectory: boolean }[] {
  const entries = readdirSync(directory, { withFileTypes: true });
  if (!entries.some((entry) => entry.name.includes('\uFFFD'))) {
    return entries.map((entry) => ({ name: entry.name, isDirectory: entry.isDirectory() }));
  }
  return readdirSync(directory, { withFileTypes: true, encoding: 'buffer' }).map((entry) => ({
    name: decodeName(entry.name),
    isDirectory: entry.isDirectory(),
  }));
}

/** A symbolic link's target, exactly as on disk. */
export function readLinkSync(path: string): string {
  return decodeName(readlinkSync(diskPath(path), { encoding: 'buffer' }));
}

/** Orders names as their bytes do (the order of tree entries). */
export function compareNames(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index++) {
    const x = a.charCodeAt(index);
    const y = b.charCodeAt(index);
    if (x === y) continue;
    // Below U+D800, UTF-16 code units order as their UTF-8 bytes do; past it (surrogate pairs,
    // escaped bytes, U+E000 and up) the bytes are compared. The same units before: the same bytes.
    if (x < 0xd800 && y < 0xd800) return x < y ? -1 : 1;
    return Buffer.compare(nameBytes(a), nameBytes(b));
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

/**
 * A path as shown to a person: a byte that is not UTF-8 appears as `\xHH`, so a terminal shows
 * something rather than a replacement character.
 */
export function displayPath(path: string): string {
  return hasEscapedBytes(path)
    ? path.replace(
        /[\uDC80-\uDCFF]/gu,
        (byte) => `\\x${(byte.charCodeAt(0) - 0xdc00).toString(16)}`,
      )
    : path;
}
