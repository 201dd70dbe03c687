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

/**
 * Stores a conversation as a tree with one object per message, in order. Messages are objects
 * named by their content, so storing a longer history again costs only its new messages, and the
 * exact list comes back whatever happens to the history later. Each message is kept as its
 * canonical JSON (key order normalized; `undefined` fields dropped, as JSON does).
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
      text = canonicalJson(JSON.parse(JSON.stringify(message)) as JsonValue);
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
      messages.push(JSON.parse(text) as Message);
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
