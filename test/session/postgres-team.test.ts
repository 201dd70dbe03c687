// Team mode: copies of one workspace, each with its own store and its own lock, working in one
// session whose ledger is in PostgreSQL. A "check, then append" (a label not taken, an action
// not undone, the conversation a rollback replaces) must hold across copies, as it holds for
// operations of one copy under its lock.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachShared, init, log, openSession, type Session } from '../../src/session/index.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres.js';
import { type S3Server, startS3Server } from '../helpers/s3.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

let server: PostgresServer;
let s3: S3Server;
const saved = { ...process.env };

beforeAll(async () => {
  [server, s3] = await Promise.all([startPostgres({ durable: false }), startS3Server()]);
  Object.assign(process.env, s3.environment);
}, 60_000);
afterAll(async () => {
  process.env = saved;
  await Promise.all([server?.stop(), s3?.close()]);
});

/** Two copies of one workspace attached to one shared session, each with a session open on it. */
async function twoCopies(name: string): Promise<{ first: string; second: string; id: string }> {
  const objects = `s3://${s3.bucket}/${name}`;
  const first = await makeTempDirectory();
  await lay(first, { 'a.txt': 'one\n', 'src/b.txt': 'bee\n' });
  await init({ workspace: first, ledger: server.url, objects });
  const opened = await openSession({ workspace: first });
  await opened.checkpoint('base');
  await opened.close();
  const second = await makeTempDirectory();
  await attachShared({ workspace: second, session: opened.id, ledger: server.url, objects });
  return { first, second, id: opened.id };
}

/** The outcomes of `calls`, all started at once: the values, and the codes of what threw. */
async function race<T>(calls: (() => Promise<T>)[]): Promise<{ won: T[]; lost: string[] }> {
  const settled = await Promise.allSettled(calls.map((call) => call()));
  return {
    won: settled.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : [])),
    lost: settled.flatMap((outcome) =>
      outcome.status === 'rejected' ? [`${outcome.reason.code}: ${outcome.reason.message}`] : [],
    ),
  };
}

describe('copies of a workspace in one session on PostgreSQL', () => {
  it('let exactly one of many concurrent checkpoints with one label be made', async () => {
    const { first, second } = await twoCopies('labels');
    // Two sessions on each copy: those of one copy wait for each other's lock, not for the
    // other copy's.
    const sessions: Session[] = await Promise.all(
      [first, first, second, second].map((workspace) => openSession({ workspace })),
    );
    try {
      for (let round = 0; round < 6; round++) {
        const label = `shared-${round}`;
        const { won, lost } = await race(
          sessions.map((session) => () => session.checkpoint(label)),
        );
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(3);
        for (const loss of lost) {
          expect(loss).toMatch(
            new RegExp(
              `^CHECKPOINT_EXISTS: .*already has a checkpoint "${label}" \\(#${won[0]?.seq}\\)`,
            ),
          );
        }
      }
    } finally {
      await Promise.all(sessions.map((session) => session.close()));
    }
    const labels = (await log({ workspace: first })).entries
      .filter((line) => line.kind === 'checkpoint-created')
      .map((line) => line.entry.body.label);
    expect(labels).toEqual(['base', ...[0, 1, 2, 3, 4, 5].map((round) => `shared-${round}`)]);
  }, 120_000);

  it('give each of many concurrent checkpoints without a label its own checkpoint-N', async () => {
    const { first, second } = await twoCopies('default-labels');
    const sessions: Session[] = await Promise.all(
      [first, first, second, second].map((workspace) => openSession({ workspace })),
    );
    try {
      for (let round = 0; round < 3; round++) {
        const { won, lost } = await race(sessions.map((session) => () => session.checkpoint()));
        expect(lost).toEqual([]);
        expect(new Set(won.map((checkpoint) => checkpoint.label)).size).toBe(4);
      }
    } finally {
      await Promise.all(sessions.map((session) => session.close()));
    }
    const labels = (await log({ workspace: first })).entries
      .filter((line) => line.kind === 'checkpoint-created')
      .map((line) => line.entry.body.label);
    // "base" is the first: checkpoint-N counts from the number there are.
    expect(labels).toEqual([
      'base',
      ...Array.from({ length: 12 }, (_, index) => `checkpoint-${index + 2}`),
    ]);
  }, 120_000);

  it('let one action be undone once, whichever copy undoes it', async () => {
    const { first, second } = await twoCopies('undo');
    const here = await openSession({ workspace: first });
    const there = await openSession({ workspace: second });
    try {
      for (let round = 0; round < 4; round++) {
        const written = await here.write('a.txt', `round ${round}\n`);
        // The other copy holds the same file, so that it, too, may undo the write.
        await writeFile(join(second, 'a.txt'), `round ${round}\n`);
        const { won, lost } = await race([
          () => here.undo(written.id),
          () => there.undo(written.id),
        ]);
        expect(won).toHaveLength(1);
        expect(won[0]).toMatchObject({ status: 'undone', undoes: written.id });
        expect(lost).toEqual([
          expect.stringMatching(
            new RegExp(`^ACTION_NOT_ALLOWED: Action #${written.id} .* is undone already`),
          ),
        ]);
        const undos = (await log({ workspace: first })).entries.filter(
          (line) => line.kind === 'undo-started' && line.entry.body.undoes === written.id,
        );
        expect(undos).toHaveLength(1);
        // Put the copy that did not undo back in step with the one that did.
        const undone = won[0]?.status === 'undone' ? won[0] : undefined;
        expect(undone).toBeDefined();
        const before = round === 0 ? 'one\n' : `round ${round - 1}\n`;
        for (const copy of [first, second]) await writeFile(join(copy, 'a.txt'), before);
      }
    } finally {
      await Promise.all([here.close(), there.close()]);
    }
  }, 120_000);

  it('serializes rollbacks that move the conversation: each records the one it replaced', async () => {
    const { first, second } = await twoCopies('rollbacks');
    const here = await openSession({ workspace: first });
    const there = await openSession({ workspace: second });
    const said = (text: string) => [{ role: 'user', content: text }];
    try {
      await here.checkpoint('one', { messages: said('first'), format: 'openai-chat' });
      await here.checkpoint('two', { messages: said('second'), format: 'openai-chat' });
      for (let round = 0; round < 4; round++) {
        const { won, lost } = await race([() => here.rollback('one'), () => there.rollback('two')]);
        expect(lost).toEqual([]);
        expect(won).toHaveLength(2);
      }
    } finally {
      await Promise.all([here.close(), there.close()]);
    }
    // Each rollback names as replaced the conversation the one before it restored.
    const entries = (await log({ workspace: first })).entries.map((line) => line.entry);
    const starts = entries.filter(
      (entry) => entry.kind === 'rollback-started' && entry.body.label !== 'base',
    );
    expect(starts).toHaveLength(8);
    for (let index = 1; index < starts.length; index++) {
      const previous = starts[index - 1]?.body.conversationAfter as { tree: string };
      const before = starts[index]?.body.conversationBefore as { tree: string };
      expect(before.tree).toBe(previous.tree);
    }
    expect(await readFile(join(first, 'a.txt'), 'utf8')).toBe('one\n');
  }, 120_000);
});
