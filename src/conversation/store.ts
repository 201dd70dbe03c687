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
  /** A tree with one file per message, named by position (`00000000.json`, ...). */
  tree: Digest;
  messageCount: number;
}

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
 * Stores a conversation as a tree with one object per message, in order. Messages are objects
 * named by their content, so storing a longer history again costs only its new messages, and the
 * exact list comes back whatever happens to the history later. Each message is kept as
 * {@link storedMessageText} writes it.
 * The caller commits `batch`.
 */
export async function storeConversation(
  messages: readonly Message[],
  batch: ObjectBatch,
): Promise<StoredConversation> {
  const entries: TreeEntry[] = [];
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
    entries.push({
      name: `${String(index).padStart(8, '0')}.json`,
      type: 'file',
      mode: 0o644,
      sizeBytes,
      digest,
    });
  }
  const { digest } = await batch.put(encodeTree(entries));
  return { tree: digest, messageCount: messages.length };
}

/**
 * Reads back a stored conversation, every message exactly as stored. Throws `TREE_INVALID` when
 * a message is not JSON (the tree is not a conversation: a damaged entry may name another tree),
 * and what reading its objects throws.
 */
export async function readConversation(store: ObjectStore, tree: Digest): Promise<Message[]> {
  const messages: Message[] = [];
  for (const entry of (await readTree(store, tree)).entries) {
    if (entry.type !== 'file') continue;
    const text = (await store.get(entry.digest)).toString('utf8');
    try {
      messages.push(JSON.parse(text, decodeBinary) as Message);
    } catch (error) {
      throw new RewindError(
        'TREE_INVALID',
        `Tree ${tree} is not a conversation: its ${entry.name} is not JSON. The entry that names it may be damaged; run \`rewind verify\`.`,
        { data: { digest: tree, name: entry.name }, cause: error },
      );
    }
  }
  return messages;
}
