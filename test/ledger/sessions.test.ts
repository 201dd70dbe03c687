import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  Ledger,
  listSessions,
  readCurrentSession,
  resolveSession,
  setCurrentSession,
} from '../../src/ledger/index.js';
import { initStore } from '../../src/store/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

async function storeWithSessions(ids: string[]) {
  const { directory } = await initStore(await makeTempDirectory());
  let minute = 0;
  for (const id of ids) {
    const ledger = await Ledger.create(directory, {
      generateId: () => id,
      now: () => new Date(Date.UTC(2026, 10, 29, 10, minute++)),
    });
    await ledger.close();
  }
  return directory;
}

describe('sessions', () => {
  it('lists sessions oldest first, ignoring files that are not ledgers', async () => {
    const directory = await storeWithSessions(['zzz111', 'aaa222', 'mmm333']);
    await writeFile(join(directory, 'sessions', 'README.txt'), 'not a ledger');
    expect((await listSessions(directory)).map((session) => session.id)).toEqual([
      'zzz111',
      'aaa222',
      'mmm333',
    ]);
  });

  it('resolves a session by id, file name, or unique prefix of four characters or more', async () => {
    const directory = await storeWithSessions(['abcd1111', 'abcd2222', 'wxyz0000']);
    expect((await resolveSession(directory, 'wxyz0000')).id).toBe('wxyz0000');
    expect((await resolveSession(directory, '2026-11-29_wxyz0000.jsonl')).id).toBe('wxyz0000');
    expect((await resolveSession(directory, 'abcd1')).id).toBe('abcd1111');
    await expect(resolveSession(directory, 'abcd')).rejects.toMatchObject({
      code: 'SESSION_AMBIGUOUS',
      data: { matches: ['abcd1111', 'abcd2222'] },
    });
    await expect(resolveSession(directory, 'wxy')).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
    await expect(resolveSession(directory, 'nope')).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
  });

  it.runIf(process.platform === 'linux')(
    'finds a session, and the current one, without reading any ledger: as fast among 300 sessions as among 3',
    async () => {
      const ids = Array.from({ length: 300 }, (_, index) => `s${String(index).padStart(7, '0')}`);
      const directory = await storeWithSessions([...ids, 'wxyz0000']);
      await setCurrentSession(directory, await resolveSession(directory, 's0000150'));
      // The bytes this process has read through read(2) and its kin, every thread counted.
      const bytesRead = () =>
        Number(/^rchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))?.[1]);
      const before = bytesRead();
      expect((await readCurrentSession(directory))?.id).toBe('s0000150');
      expect((await resolveSession(directory, 'wxyz')).id).toBe('wxyz0000');
      await expect(resolveSession(directory, 's000029')).rejects.toMatchObject({
        code: 'SESSION_AMBIGUOUS',
        data: { matches: ids.slice(290, 300) },
      });
      // The `current` file and the reading of /proc/self/io itself; one ledger's start alone is
      // 4,096 bytes (each ledger here is ~300).
      expect(bytesRead() - before).toBeLessThan(3_000);
    },
  );

  it('remembers the current session', async () => {
    const directory = await storeWithSessions(['abcd1111', 'wxyz0000']);
    expect(await readCurrentSession(directory)).toBeUndefined();
    await setCurrentSession(directory, await resolveSession(directory, 'wxyz0000'));
    expect((await readCurrentSession(directory))?.id).toBe('wxyz0000');
  });
});
