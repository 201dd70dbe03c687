import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type AnyOperation, OPERATIONS } from '../../src/operations/index.js';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';

const operations: readonly AnyOperation[] = OPERATIONS;
/** Need a PostgreSQL server and a bucket: their --json documents are checked in postgres-store.test.ts. */
const ELSEWHERE = new Set(['attach', 'push', 'pull', 'session-find']);
const onCli = operations
  .filter((operation) => operation.excludedFrom?.cli === undefined)
  .map((operation) => operation.name)
  .filter((name) => !ELSEWHERE.has(name));

type Document = Record<string, unknown>;

/** Every key named `seq` in a document, but inside raw ledger entries (`entry`, SPEC.md's format). */
function seqKeys(value: unknown, path = ''): string[] {
  if (Array.isArray(value))
    return value.flatMap((item, index) => seqKeys(item, `${path}[${index}]`));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, item]) =>
    key === 'entry' ? [] : key === 'seq' ? [`${path}.seq`] : seqKeys(item, `${path}.${key}`),
  );
}

describe('rewind --json', () => {
  it('prints exactly one JSON object for every command, and names every entry it creates or names `id`', async () => {
    const cwd = await makeTempDirectory();
    const server = createServer((_request, response) => response.end('ok'));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const documents = new Map<string, Document>();
    /** Runs a command with --json; its stdout must be one JSON object, nothing else. */
    const json = async (name: string, argv: string[], stdin?: string): Promise<Document> => {
      const result = await rewind(cwd, ['--json', ...argv], stdin === undefined ? {} : { stdin });
      expect(result.code, `${argv.join(' ')}: ${result.stderr}`).toBe(0);
      const document: unknown = JSON.parse(result.stdout);
      expect(typeof document === 'object' && document !== null && !Array.isArray(document)).toBe(
        true,
      );
      expect(seqKeys(document), argv.join(' ')).toEqual([]);
      documents.set(name, document as Document);
      return document as Document;
    };
    try {
      await writeFile(join(cwd, 'a.txt'), 'one\n');
      const initialized = await json('init', ['init']);
      expect(initialized.preview).toMatchObject({ fileCount: 1, isFirst: true, leftOutCount: 0 });
      const base = await json('checkpoint', ['checkpoint', 'base']);
      expect(base).toMatchObject({ id: 2, label: 'base' });
      expect(await json('checkpoints', ['checkpoints'])).toEqual({
        checkpoints: [expect.objectContaining({ id: 2, label: 'base' })],
        warnings: [],
      });
      const written = await json('write', ['write', 'b.txt', 'two']);
      expect(written).toMatchObject({ id: 3, kind: 'write' });
      expect(await json('read', ['read', 'b.txt'])).toEqual({ path: 'b.txt', content: 'two' });
      expect(await json('list', ['list'])).toEqual({ path: '.', entries: ['a.txt', 'b.txt'] });
      await json('move', ['move', 'b.txt', 'c.txt']);
      await json('mkdir', ['mkdir', 'd']);
      await json('delete', ['delete', 'd']);
      const ran = await json('exec', ['exec', 'echo hi']);
      expect(ran).toMatchObject({ stdout: 'hi\n' });
      expect(await json('show', ['show', String(ran.id)])).toMatchObject({
        id: ran.id,
        kind: 'exec',
        command: { exitCode: 0, stdout: { text: 'hi\n' } },
        closed: expect.any(Object),
      });
      await json('http', ['http', 'GET', url]);
      const recorded = await json('record', ['record', 'deploy', '--compensate-command', 'true']);
      await json('report', ['report', String(recorded.id)]);
      const shownCompensation = await json('compensate', [
        'compensate',
        String(recorded.id),
        '--dry-run',
      ]);
      expect(shownCompensation).toEqual({ id: recorded.id, compensation: { command: 'true' } });
      const compensated = await json('compensate', ['compensate', String(recorded.id), '--yes']);
      expect(compensated).toMatchObject({ compensates: recorded.id, kind: 'exec' });
      expect(compensated.id).toBeGreaterThan(recorded.id as number);
      const drafted = await json('exec', ['exec', '--draft', 'true']);
      await json('approve', ['approve', String(drafted.id), '--yes']);
      const other = await json('exec', ['exec', '--draft', 'true']);
      await json('discard', ['discard', String(other.id)]);
      await json(
        'conversation-sync',
        ['conversation', 'sync', '-'],
        '[{"role":"user","content":"hi"}]',
      );
      expect(await json('conversation-show', ['conversation', 'show'])).toMatchObject({
        format: 'openai-chat',
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(await json('rollback', ['rollback', 'base', '--dry-run'])).toMatchObject({
        isDryRun: true,
        label: 'base',
        id: null,
      });
      const rolled = await json('rollback', ['rollback', 'base']);
      expect(rolled).toMatchObject({ isDryRun: false, label: 'base', id: expect.any(Number) });
      expect(await json('undo', ['undo', String(rolled.id)])).toMatchObject({
        status: 'undone',
        undoes: rolled.id,
      });
      await json('diff', ['diff', 'base']);
      await json('checkpoint', ['checkpoint', 'second']);
      expect(await json('prune', ['prune', '--keep-last', '1', '--dry-run'])).toEqual({
        isDryRun: true,
        pruned: [{ id: 2, label: 'base', reason: 'keep-last' }],
        spared: [],
        keptCount: 1,
      });
      const noted = await json('note', ['note', 'done']);
      expect(noted).toMatchObject({ id: expect.any(Number), entry: { seq: noted.id } });
      const logged = await json('log', ['log', '--last', '1']);
      expect(logged.entries).toEqual([
        expect.objectContaining({ id: noted.id, kind: 'note-added' }),
      ]);
      await json('status', ['status']);
      await json('verify', ['verify']);
      await json('gc', ['gc', '--dry-run']);
      await json('test', ['test', '--verifier', `echo '{"status":"pass"}'`]);
      await json('init', ['init', '--isolated']);
      await json('write', ['write', 'e.txt', 'in the view']);
      expect(await json('commit', ['commit', '--dry-run'])).toMatchObject({
        status: 'dry-run',
        id: null,
      });
      expect(await json('commit', ['commit'])).toMatchObject({
        status: 'committed',
        id: expect.any(Number),
      });
      await json('destroy', ['destroy']);
      const sessionId = (initialized.session as Document).id;
      const started = await json('session-new', ['session', 'new']);
      expect(started.session).toMatchObject({ id: expect.any(String), isCurrent: true });
      const listed = await json('session-list', ['session', 'list']);
      expect(listed).toMatchObject({ currentSession: (started.session as Document).id });
      expect((listed.sessions as Document[]).map((session) => session.id)).toContain(sessionId);
      expect(await json('session-use', ['session', 'use', String(sessionId)])).toMatchObject({
        session: { id: sessionId, isCurrent: true },
      });
    } finally {
      await new Promise((done) => server.close(done));
    }
    expect([...documents.keys()].sort()).toEqual([...onCli].sort());
  });

  it('bounds a long list to 1,000 items and says how many there are', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init', '-q']);
    for (let index = 0; index < 1200; index++) await writeFile(join(cwd, `f${index}.txt`), 'a');
    await rewind(cwd, ['checkpoint', 'base', '--yes']);
    for (let index = 0; index < 1200; index++) await writeFile(join(cwd, `f${index}.txt`), 'b');
    const plan = JSON.parse(
      (await rewind(cwd, ['--json', 'rollback', 'base', '--dry-run'])).stdout,
    );
    expect(plan.changes).toHaveLength(1000);
    expect(plan.changeCount).toBe(1200);
  });

  it('names a refused undo `id: null`, never leaving the key out', async () => {
    const cwd = await makeTempDirectory();
    await writeFile(join(cwd, 'a.txt'), 'a');
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'base']);
    await writeFile(join(cwd, 'a.txt'), 'b');
    await rewind(cwd, ['rollback', 'base']);
    await writeFile(join(cwd, 'a.txt'), 'edited since');
    const refused = await rewind(cwd, ['--json', 'undo', '3']);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout)).toMatchObject({ status: 'refused', id: null, undoes: 3 });
  });
});
