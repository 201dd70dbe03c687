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

  it('remembers the current session', async () => {
    const directory = await storeWithSessions(['abcd1111', 'wxyz0000']);
    expect(await readCurrentSession(directory)).toBeUndefined();
    await setCurrentSession(directory, await resolveSession(directory, 'wxyz0000'));
    expect((await readCurrentSession(directory))?.id).toBe('wxyz0000');
  });
});
