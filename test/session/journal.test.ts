import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isRewindError } from '../../src/errors.js';
import { readLedgerFile } from '../../src/ledger/index.js';
import { note, openSession, type Session } from '../../src/session/index.js';
import { sessionOn } from '../helpers/session.js';

/** What a session knows from its ledger, as its public API tells it. */
async function viewsOf(session: Session) {
  const conversation = await session.conversation();
  return {
    actions: await session.actions(),
    checkpoints: await session.checkpoints(),
    conversation: conversation && { format: conversation.format, tree: conversation.tree },
  };
}

const PATHS = ['a.txt', 'src/b.txt', 'src/c/d.txt'];

/** What agents and people do to a session, and what other processes append meanwhile. */
type Step =
  | { type: 'write'; path: number; text: string }
  | { type: 'delete'; path: number }
  | { type: 'exec'; path: number }
  | { type: 'checkpoint' }
  | { type: 'rollback'; pick: number }
  | { type: 'undo-last' }
  | { type: 'undo-some'; pick: number }
  | { type: 'conversation'; count: number }
  | { type: 'automatic-checkpoint' }
  | { type: 'note-from-elsewhere' }
  | { type: 'write-from-another-session'; path: number }
  | { type: 'restore-older-ledger' };

const path = fc.nat({ max: PATHS.length - 1 });
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ type: fc.constant('write' as const), path, text: fc.string({ maxLength: 8 }) }),
  fc.record({ type: fc.constant('delete' as const), path }),
  fc.record({ type: fc.constant('exec' as const), path }),
  fc.constant({ type: 'checkpoint' as const }),
  fc.record({ type: fc.constant('rollback' as const), pick: fc.nat() }),
  fc.constant({ type: 'undo-last' as const }),
  fc.record({ type: fc.constant('undo-some' as const), pick: fc.nat() }),
  fc.record({ type: fc.constant('conversation' as const), count: fc.integer({ min: 1, max: 4 }) }),
  fc.constant({ type: 'automatic-checkpoint' as const }),
  fc.constant({ type: 'note-from-elsewhere' as const }),
  fc.record({ type: fc.constant('write-from-another-session' as const), path }),
  fc.constant({ type: 'restore-older-ledger' as const }),
);

describe('the journal of a long-lived session', () => {
  it('tells what a freshly opened session tells, through random operations, appends from elsewhere and a ledger restored from a backup', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 25 }), async (steps) => {
        const { workspace, session } = await sessionOn({ 'a.txt': 'a', 'src/b.txt': 'b' });
        session.autoCheckpoint({ keepLast: 2 });
        const tool = session.tool(async () => 'ok', { name: 'noop' });
        const sessions = join(workspace, '.rewind', 'sessions');
        const ledger = join(sessions, (await readdir(sessions))[0] as string);
        let labels = 0;
        const backup = await readFile(ledger, 'utf8');
        try {
          for (const current of steps) {
            try {
              if (current.type === 'write') {
                await session.write(PATHS[current.path] as string, current.text);
              } else if (current.type === 'delete') {
                await session.delete(PATHS[current.path] as string);
              } else if (current.type === 'exec') {
                await session.exec(['sh', '-c', `echo x >> ${PATHS[current.path]}`]);
              } else if (current.type === 'checkpoint') {
                await session.checkpoint(`c${++labels}`);
              } else if (current.type === 'rollback') {
                const checkpoints = await session.checkpoints();
                const target = checkpoints[current.pick % Math.max(1, checkpoints.length)];
                if (target) await session.rollback(target.label);
              } else if (current.type === 'undo-last') {
                await session.undo('last');
              } else if (current.type === 'undo-some') {
                const actions = await session.actions();
                const target = actions[current.pick % Math.max(1, actions.length)];
                if (target) await session.undo(target.id);
              } else if (current.type === 'conversation') {
                await session.syncConversation(
                  Array.from({ length: current.count }, (_, index) => ({
                    role: index % 2 === 0 ? 'user' : 'assistant',
                    content: `message ${index} of ${labels}`,
                  })),
                  { format: 'openai-chat' },
                );
              } else if (current.type === 'automatic-checkpoint') {
                await tool();
              } else if (current.type === 'note-from-elsewhere') {
                // Appended by another writer, without the workspace lock.
                await note({ workspace, text: 'from elsewhere' });
              } else if (current.type === 'write-from-another-session') {
                const other = await openSession({ workspace, session: session.id });
                await other.write(PATHS[current.path] as string, 'other');
                await other.close();
              } else {
                // The ledger is put back as a backup held it, and another writer appends to it
                // until it is as long as before: the session must notice and start over.
                const length = (await readLedgerFile(ledger)).entries.length;
                await writeFile(ledger, backup);
                const other = await openSession({ workspace, session: session.id });
                for (
                  let index = 0;
                  (await readLedgerFile(ledger)).entries.length < length;
                  index++
                ) {
                  await other.write(`restored-${index}.txt`, 'after the restore');
                }
                await other.close();
              }
            } catch (error) {
              // Refusals are part of the game (nothing to undo, a path that is gone).
              if (!isRewindError(error)) throw error;
            }
            const fresh = await openSession({ workspace, session: session.id });
            try {
              expect(await viewsOf(session)).toEqual(await viewsOf(fresh));
            } finally {
              await fresh.close();
            }
          }
        } finally {
          await session.close();
        }
      }),
      { numRuns: 12 },
    );
  });
});
