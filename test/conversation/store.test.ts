import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readConversation, storeConversation } from '../../src/conversation/index.js';
import { createObjectStore, encodeTree, initStore, readTree } from '../../src/store/index.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';

const message = (index: number) => ({
  role: index % 2 === 0 ? 'user' : 'assistant',
  content: `message ${index} ${'x'.repeat(1000)}`,
});

async function storeSize(directory: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(directory, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return total;
}

describe('conversation storage', () => {
  it('reads back every length exactly, in runs a longer history shares', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(directory);
    const history = Array.from({ length: 70 }, (_, index) => message(index));
    const trees = new Map<number, string>();
    for (let length = 0; length <= history.length; length++) {
      const batch = store.batch();
      const stored = await storeConversation(history.slice(0, length), batch);
      await batch.commit();
      expect(stored.messageCount).toBe(length);
      expect(await readConversation(store, stored.tree)).toEqual(history.slice(0, length));
      trees.set(length, stored.tree);
    }
    // 70 = 64 + 4 + 2: three runs, the first the very run a history of 64 messages is.
    const top = (await readTree(store, trees.get(70) as never)).entries;
    expect(top.map((entry) => [entry.name, entry.type])).toEqual([
      ['00000000', 'directory'],
      ['00000064', 'directory'],
      ['00000068', 'directory'],
    ]);
    const sixtyFour = (await readTree(store, trees.get(64) as never)).entries;
    expect(sixtyFour).toEqual([top[0]]);
    // 5 = 4 + 1: a run of one is the message's own file.
    expect(
      (await readTree(store, trees.get(5) as never)).entries.map((entry) => entry.name),
    ).toEqual(['00000000', '00000004.json']);
  });

  it('reads the flat trees earlier versions wrote', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(directory);
    const history = [message(0), message(1), message(2)];
    const entries = [];
    for (const [index, item] of history.entries()) {
      const { digest, sizeBytes } = await store.put(Buffer.from(JSON.stringify(item)));
      entries.push({
        name: `${String(index).padStart(8, '0')}.json`,
        type: 'file' as const,
        mode: 0o644,
        sizeBytes,
        digest,
      });
    }
    const { digest } = await store.put(encodeTree(entries));
    expect(await readConversation(store, digest)).toEqual(history);
  });

  it('stores 200 checkpoints of a growing history for about the history once, plus what each adds', async () => {
    const { workspace, session } = await sessionOn({});
    const objects = join(workspace, '.rewind', 'objects');
    const before = await storeSize(objects);
    const history: ReturnType<typeof message>[] = [];
    let historyBytes = 0;
    for (let index = 0; index < 200; index++) {
      history.push(message(index));
      historyBytes += JSON.stringify(history.at(-1)).length;
      await session.checkpoint(`c${index}`, { messages: [...history], format: 'openai-chat' });
    }
    const grown = (await storeSize(objects)) - before;
    // A listing of every message per checkpoint would be 15 times the history here.
    expect(grown / historyBytes).toBeLessThan(2.5);
    expect((await session.conversationAt('c199'))?.messages.slice(0, 200)).toEqual(history);
    // What is stored is checked, not how soon: 15 s here idle, past 30 s at a load of 10.
  }, 240_000);
});
