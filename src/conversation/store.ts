import { RewindError } from '../errors.js';
import { canonicalJson, type Digest, type JsonValue } from '../lib/index.js';
import {
  encodeTree,
  type ObjectBatch,
  type ObjectStore,
  readTree,
  type TreeEntry,
} from '../store/index.js';
import type { Message } from './format-adapter.js';

/** A stored conversation: its tree and how many messages it holds. */
export interface StoredConversation {
  /** The tree of its messages: see {@link storeConversation}. */
  tree: Digest;
  messageCount: number;
}

/** A position as tree entries name it: eight digits, so that names sort as positions do. */
const positionName = (index: number) => String(index).padStart(8, '0');

/** The key of the object that stands for binary content in a stored message: its bytes in base64. */
const BYTES_KEY = 'rewind:bytes';
/** Beside it, the kind of binary value when it was not a Uint8Array (`ArrayBuffer`, `Buffer`). */
const BYTES_TYPE_KEY = 'rewind:type';

/**
 * JSON.stringify's replacer for messages: binary content (an image part's `Uint8Array`, a
 * `Buffer`, an `ArrayBuffer`) becomes `{"rewind:bytes": base64}`, so it comes back byte for byte
 * (JSON alone would turn it into `{"0":137,...}`, which no provider takes back).
 */
function encodeBinary(this: unknown, key: string, value: unknown): unknown {
  const original = (this as Record<string, unknown>)[key];
  if (original instanceof ArrayBuffer) {
    return {
      [BYTES_KEY]: Buffer.from(original).toString('base64'),
      [BYTES_TYPE_KEY]: 'ArrayBuffer',
    };
  }
  if (original instanceof Uint8Array) {
    const bytes = Buffer.from(original.buffer, original.byteOffset, original.byteLength);
    return {
      [BYTES_KEY]: bytes.toString('base64'),
      ...(Buffer.isBuffer(original) && { [BYTES_TYPE_KEY]: 'Buffer' }),
    };
  }
  return value;
}

/** JSON.parse's reviver for stored messages: the binary content {@link encodeBinary} wrote, back. */
function decodeBinary(_key: string, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const record = value as Record<string, unknown>;
  const encoded = record[BYTES_KEY];
  if (typeof encoded !== 'string') return value;
  const keys = Object.keys(record);
  const type = record[BYTES_TYPE_KEY];
  if (keys.length > (type === undefined ? 1 : 2)) return value;
  const bytes = Buffer.from(encoded, 'base64');
  if (type === 'Buffer') return bytes;
  const copy = new Uint8Array(bytes);
  return type === 'ArrayBuffer' ? copy.buffer : copy;
}

/**
 * A message as it is stored: canonical JSON (key order normalized; `undefined` fields dropped, as
 * JSON does), binary content as base64. Two equal messages always give the same text. Throws
 * what JSON.stringify throws (a cycle, a bigint).
 */
export function storedMessageText(message: Message): string {
  return canonicalJson(JSON.parse(JSON.stringify(message, encodeBinary)) as JsonValue);
}

/**
 * Stores a conversation as a tree of its messages, in order, each message an object named by its
 * content (kept as {@link storedMessageText} writes it), so the exact list comes back whatever
 * happens to the history later. The messages are grouped as a binary counter groups a number:
 * the tree holds, from the first message on, runs of 2^k messages for the bits of the count, the
 * largest first; a run of one is the message's file (`00000012.json`), a longer one a subtree
 * named by its first position (`00000000`) holding its two halves. A run depends only on its
 * messages, so a longer history shares every full run with the shorter one: storing a growing
 * history again costs its new messages and a few small trees (at most log2 of the count entries
 * each), not a listing of every message. The caller commits `batch`.
 */
export async function storeConversation(
  messages: readonly Message[],
  batch: ObjectBatch,
): Promise<StoredConversation> {
  const files: TreeEntry[] = [];
  for (const [index, message] of messages.entries()) {
    let text: string;
    try {
      text = storedMessageText(message);
    } catch (error) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `Message ${index} cannot be stored as JSON: ${(error as Error).message}.`,
        { data: { index }, cause: error },
      );
    }
    const { digest, sizeBytes } = await batch.put(Buffer.from(text));
    files.push({
      name: `${positionName(index)}.json`,
      type: 'file',
      mode: 0o644,
      sizeBytes,
      digest,
    });
  }
  // The entry of the run of `size` messages (a power of two) that starts at `start`.
  const run = async (start: number, size: number): Promise<TreeEntry> => {
    if (size === 1) return files[start] as TreeEntry;
    const half = size / 2;
    const children = [await run(start, half), await run(start + half, half)];
    const { digest } = await batch.put(encodeTree(children));
    return { name: positionName(start), type: 'directory', mode: 0o755, digest };
  };
  const top: TreeEntry[] = [];
  let start = 0;
  for (let size = 2 ** 30; size >= 1; size /= 2) {
    if (messages.length - start >= size) {
      top.push(await run(start, size));
      start += size;
    }
  }
  const { digest } = await batch.put(encodeTree(top));
  return { tree: digest, messageCount: messages.length };
}

/**
 * Reads back a stored conversation, every message exactly as stored. Throws `TREE_INVALID` when
 * a message is not JSON (the tree is not a conversation: a damaged entry may name another tree),
 * and what reading its objects throws.
 */
export async function readConversation(store: ObjectStore, tree: Digest): Promise<Message[]> {
  const messages: Message[] = [];
  await readRuns(store, tree, messages, 0);
  return messages;
}

/** Reads the messages of a tree of runs (or the flat tree earlier versions wrote) into `into`, in order. */
async function readRuns(
  store: ObjectStore,
  tree: Digest,
  into: Message[],
  depth: number,
): Promise<void> {
  // A conversation of 2^31 messages is no conversation: a deeper tree is damage, not a history.
  if (depth > 31) {
    throw new RewindError(
      'TREE_INVALID',
      `Tree ${tree} is not a conversation: its runs nest deeper than any history. The entry that names it may be damaged; run \`rewind verify\`.`,
      { data: { digest: tree } },
    );
  }
  for (const entry of (await readTree(store, tree)).entries) {
    if (entry.type === 'directory') {
      await readRuns(store, entry.digest, into, depth + 1);
      continue;
    }
    if (entry.type !== 'file') continue;
    const text = (await store.get(entry.digest)).toString('utf8');
    try {
      into.push(JSON.parse(text, decodeBinary) as Message);
    } catch (error) {
      throw new RewindError(
        'TREE_INVALID',
        `Tree ${tree} is not a conversation: its ${entry.name} is not JSON. The entry that names it may be damaged; run \`rewind verify\`.`,
        { data: { digest: tree, name: entry.name }, cause: error },
      );
    }
  }
}
