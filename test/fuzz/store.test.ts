import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestBytes } from '../../src/lib/index.js';
import {
  createObjectStore,
  decodeTree,
  encodeTree,
  initStore,
  type ObjectStore,
  readTree,
  type Tree,
} from '../../src/store/index.js';
import {
  type ChangeRecord,
  loadChangeRecord,
  recordedTree,
  saveChangeRecord,
} from '../../src/workspace/changes.js';
import { cachedReferences, snapshot } from '../../src/workspace/index.js';
import { StatCache } from '../../src/workspace/stat-cache.js';
import {
  adversarialJsonText,
  expectDocumentedFailure,
  hostileValueText,
  makeRealStore,
  mutated,
  outcomeOf,
  RUNS,
  randomBytes,
  readFixtureFiles,
  trickyString,
} from '../helpers/fuzz.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { laterClock, lay, makeWorkspace } from '../helpers/workspace.js';

const TREE_FIELDS = ['entries', 'type', 'v', 'name', 'mode', 'digest', 'sizeBytes', 'target'];
const RECORD_FIELDS = [
  'v',
  'root',
  'clock',
  'bootId',
  'wallNs',
  'offsetNs',
  'tree',
  'totals',
  'fileCount',
  'directoryCount',
  'sizeBytes',
  'ignoreDirectories',
  'outsideRules',
  'directories',
  'digest',
];
const SOME_DIGEST = digestBytes('some content');

let directory = '';
let treeSeeds: Buffer[] = [];
let statCacheSeeds: Buffer[] = [];
let recordSeeds: Buffer[] = [];
/** The workspace root the change records were written for. */
const ROOT = '/work/fuzz-root';

beforeAll(async () => {
  // Kept for the whole file: makeTempDirectory's are removed after each test.
  directory = await mkdtemp(join(tmpdir(), 'rewind-fuzz-store-'));
  const real = await makeRealStore(await makeTempDirectory('rewind-fuzz-real-'));
  const fixtures = await readFixtureFiles();
  treeSeeds = [
    ...real.trees,
    ...[...fixtures.values()].filter((bytes) => bytes.toString().startsWith('{"entries"')),
  ];
  // A cache of tricky names (newlines, quotes, non-ASCII, very long), as the real code writes it.
  const cacheStore = join(directory, 'cache-seed');
  const cache = StatCache.empty();
  const names = ['a', 'dir/', 'new\nline', 'quote"d', 'é/😀', 'x'.repeat(300), 'link'];
  for (const [index, name] of names.entries()) {
    const payload = name === 'link' ? '../target\nwith newline' : digestBytes(name);
    cache.record(name, `${index}:1700000000000000000:1700000000000000000:${index}:420`, payload);
  }
  await cache.save(cacheStore, 1_700_000_005_000_000_000n);
  statCacheSeeds = [real.statCache, await readFile(join(cacheStore, 'cache', 'snapshot-v1'))];
  const record: ChangeRecord = {
    root: ROOT,
    clock: { bootId: 'boot', wallNs: 1_700_000_000_000_000_000n, offsetNs: 42n },
    tree: SOME_DIGEST,
    totals: { fileCount: 3, directoryCount: 2, sizeBytes: 100 },
    ignoreDirectories: ['', 'sub\ndir'],
    outsideRules: SOME_DIGEST,
    directories: new Map([
      ['', '1:2'],
      ['sub', '3:4'],
      ['é "x"', '5:6'],
    ]),
  };
  await saveChangeRecord(join(directory, 'record-seed'), record);
  const realRecord = JSON.parse(
    real.changeRecord.subarray(real.changeRecord.indexOf(0x0a) + 1).toString(),
  ) as { root: string };
  // The real record, moved to ROOT (and its digest with it) by saving it again.
  const moved = loadChangeRecord(real.storeDirectory, realRecord.root) as ChangeRecord;
  await saveChangeRecord(join(directory, 'record-real'), { ...moved, root: ROOT });
  recordSeeds = [
    await readFile(join(directory, 'record-seed', 'cache', 'changes-v3.json')),
    await readFile(join(directory, 'record-real', 'cache', 'changes-v3.json')),
  ];
}, 30_000);

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

/** A tree entry of every shape, its fields of the right or the wrong type. */
const entryText = fc
  .record({
    name: fc.oneof(
      trickyString().map((name) => JSON.stringify(name)),
      hostileValueText,
    ),
    type: fc.oneof(
      fc.constantFrom('"file"', '"directory"', '"symlink"', '"tree"'),
      hostileValueText,
    ),
    mode: fc.oneof(
      fc.constantFrom('420', '493', '4095', '4096', '-1', '0.5', '-0'),
      hostileValueText,
    ),
    digest: fc.oneof(fc.constant(JSON.stringify(SOME_DIGEST)), hostileValueText),
    sizeBytes: fc.oneof(
      fc.constantFrom('0', '12', '9007199254740992', '-1', '1e400'),
      hostileValueText,
    ),
    target: fc.oneof(
      trickyString().map((target) => JSON.stringify(target)),
      hostileValueText,
    ),
    keys: fc.subarray(['name', 'type', 'mode', 'digest', 'sizeBytes', 'target'] as const),
  })
  .map(
    (entry) =>
      `{${entry.keys
        .sort()
        .map((key) => `"${key}":${entry[key]}`)
        .join(',')}}`,
  );

/** What a tree object may hold: damaged real trees, random bytes, JSON, trees of wild entries. */
const treeBytes = fc.oneof(
  { weight: 4, arbitrary: fc.constant(null).chain(() => mutated(treeSeeds)) },
  { weight: 1, arbitrary: randomBytes() },
  { weight: 1, arbitrary: adversarialJsonText(TREE_FIELDS).map((text) => Buffer.from(text)) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.array(entryText, { maxLength: 4 }), fc.constantFrom('1', '0', '2', '"1"', '1.0'))
      .map(([entries, v]) =>
        Buffer.from(`{"entries":[${entries.join(',')}],"type":"tree","v":${v}}`),
      ),
  },
);

function expectTreeOrInvalid(
  bytes: Buffer,
  outcome: { isThrown: boolean; value?: Tree; error?: unknown },
): void {
  if (outcome.isThrown) {
    expectDocumentedFailure(outcome.error, ['TREE_INVALID']);
    return;
  }
  // Only the exact canonical encoding of its entries is a tree.
  expect(encodeTree((outcome.value as Tree).entries).equals(bytes)).toBe(true);
}

describe('fuzzing trees', () => {
  it('decodeTree gives back only trees in their exact canonical encoding, and refuses anything else as TREE_INVALID', async () => {
    await fc.assert(
      fc.asyncProperty(treeBytes, async (bytes) => {
        expectTreeOrInvalid(bytes, await outcomeOf(() => decodeTree(bytes)));
      }),
      { numRuns: RUNS.quick },
    );
  });

  it('readTree reads a damaged object as OBJECT_CORRUPT, never as a tree, and a stored non-tree as TREE_INVALID', async () => {
    const { directory: storeDirectory } = await initStore(await makeTempDirectory());
    const store: ObjectStore = createObjectStore(storeDirectory);
    await fc.assert(
      fc.asyncProperty(treeBytes, fc.nat(), async (bytes, pick) => {
        // Stored under its own name: read back only if it is a tree.
        const { digest } = await store.put(bytes);
        expectTreeOrInvalid(bytes, await outcomeOf(() => readTree(store, digest)));
        // Written over a real tree's object file: a tree it is not.
        const seed = treeSeeds[pick % treeSeeds.length] as Buffer;
        const { digest: seedDigest } = await store.put(seed);
        const file = join(storeDirectory, 'objects', seedDigest.slice(7, 9), seedDigest.slice(9));
        await rm(file, { force: true });
        await writeFile(file, bytes);
        // Read as another process would: this one keeps the trees it read (they are immutable).
        const read = await outcomeOf(() => readTree(createObjectStore(storeDirectory), seedDigest));
        if (bytes.equals(seed)) expect(read.isThrown).toBe(false);
        else if (read.isThrown) expectDocumentedFailure(read.error, ['OBJECT_CORRUPT']);
        else expect.fail(`a damaged object was read as a tree: ${seedDigest}`);
        await rm(file, { force: true });
        const missing = await outcomeOf(() =>
          readTree(createObjectStore(storeDirectory), seedDigest),
        );
        expect(missing.isThrown && missing.error).toMatchObject({ code: 'OBJECT_NOT_FOUND' });
      }),
      { numRuns: RUNS.normal },
    );
  });
});

/** The records of a cache Rewind wrote: its time, and each key's fingerprint and payload. */
function recordsOf(cache: Buffer): { recordedAtNs: bigint; records: [string, string, string][] } {
  const parts = cache.toString('utf8').split('\0\n');
  const recordedAtNs = BigInt((parts[0] as string).split('\0')[1] as string);
  const records = parts.slice(1, -1).map((record) => {
    const [key, fingerprint, ...payload] = record.split('\0');
    return [key, fingerprint, payload.join('\0')] as [string, string, string];
  });
  return { recordedAtNs, records };
}

let cacheRound = 0;

describe('fuzzing the snapshot caches', () => {
  it('a stat cache not exactly as Rewind wrote it is not used at all, and never answers a wrong payload', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 5, arbitrary: fc.constant(null).chain(() => mutated(statCacheSeeds)) },
          { weight: 1, arbitrary: randomBytes() },
        ),
        async (bytes) => {
          cacheRound += 1;
          const storeDirectory = join(directory, `cache-${cacheRound}`);
          await mkdir(join(storeDirectory, 'cache'), { recursive: true });
          await writeFile(join(storeDirectory, 'cache', 'snapshot-v1'), bytes);
          const loaded = await outcomeOf(() => StatCache.load(storeDirectory));
          if (loaded.isThrown) throw loaded.error;
          const cache = loaded.value;
          const seed = statCacheSeeds.find((candidate) => candidate.equals(bytes));
          if (seed === undefined) {
            expect(cache.isEmpty).toBe(true);
            expect(cache.references()).toEqual([]);
            return;
          }
          const { recordedAtNs, records } = recordsOf(seed);
          for (const [key, fingerprint, payload] of records) {
            expect(cache.lookup(key, fingerprint, 0n)).toBe(payload);
            // Changed within the racy window before the cache was written: never trusted.
            expect(cache.lookup(key, fingerprint, recordedAtNs - 1n)).toBeUndefined();
          }
        },
      ),
      { numRuns: RUNS.normal },
    );
  });

  /** True when a record's bytes are those Rewind wrote: its digest covers every byte of the JSON. */
  function isSameRecord(written: Buffer, bytes: Buffer): boolean {
    return written.equals(bytes);
  }

  it('a change record whose members are not exactly those Rewind wrote is not used, and gc never fails on it', async () => {
    const recordFields = [...RECORD_FIELDS, ROOT];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 5, arbitrary: fc.constant(null).chain(() => mutated(recordSeeds)) },
          { weight: 1, arbitrary: randomBytes() },
          {
            weight: 2,
            arbitrary: adversarialJsonText(recordFields).map((text) => Buffer.from(text)),
          },
        ),
        async (bytes) => {
          cacheRound += 1;
          const storeDirectory = join(directory, `record-${cacheRound}`);
          await mkdir(join(storeDirectory, 'cache'), { recursive: true });
          await writeFile(join(storeDirectory, 'cache', 'changes-v3.json'), bytes);
          const seed = recordSeeds.find((candidate) => isSameRecord(candidate, bytes));
          const loaded = await outcomeOf(() => loadChangeRecord(storeDirectory, ROOT));
          const tree = await outcomeOf(() => recordedTree(storeDirectory));
          const references = await outcomeOf(() => cachedReferences(storeDirectory));
          if (loaded.isThrown) throw loaded.error;
          if (tree.isThrown) throw tree.error;
          if (references.isThrown) throw references.error;
          if (seed === undefined) {
            expect(loaded.value).toBeUndefined();
            expect(tree.value).toBeUndefined();
            expect(references.value).toEqual([]);
          } else {
            expect(loaded.value?.root).toBe(ROOT);
            expect(tree.value).toBe(loaded.value?.tree);
          }
        },
      ),
      { numRuns: RUNS.normal },
    );
  });
});

describe('what fuzzing trees found', () => {
  it('decodeTree refuses an entry whose name nests deeper than JSON.stringify goes as TREE_INVALID', () => {
    const deep = `${'['.repeat(20_000)}0${']'.repeat(20_000)}`;
    const bytes = Buffer.from(`{"entries":[{"name":${deep},"type":"file"}],"type":"tree","v":1}`);
    expect(() => decodeTree(bytes)).toThrow(expect.objectContaining({ code: 'TREE_INVALID' }));
  });
});

describe('what fuzzing the snapshot caches found', () => {
  async function snapshotted(layout: Record<string, string>) {
    const { workspace, storeDirectory, store } = await makeWorkspace(layout);
    const take = async (options: { isClocked?: boolean } = {}) =>
      (
        await snapshot(workspace, {
          store,
          storeDirectory,
          ...(options.isClocked ? { changeWindowMs: 0 } : { now: laterClock }),
        })
      ).tree;
    return { workspace, storeDirectory, take };
  }

  /** The tree of a full read of the workspace in a store of its own, sharing no cache. */
  async function referenceTree(workspace: string): Promise<string> {
    const { directory: storeDirectory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(storeDirectory);
    return (await snapshot(workspace, { store, storeDirectory, now: laterClock })).tree;
  }

  // Another file is added each time, so the directory's cached tree cannot hide the damage.
  it('a stat cache whose payload was damaged into another digest is not used: the snapshot reads the file', async () => {
    const { workspace, storeDirectory, take } = await snapshotted({ 'a.txt': 'a' });
    await take();
    const file = join(storeDirectory, 'cache', 'snapshot-v1');
    const cache = await readFile(file, 'utf8');
    expect(cache).toContain(digestBytes('a'));
    await writeFile(file, cache.replace(digestBytes('a'), digestBytes('z')));
    await lay(workspace, { 'b.txt': 'b' });
    expect(await take()).toBe(await referenceTree(workspace));
  });

  it('a stat cache whose payload was damaged into something else is not used, rather than failing the snapshot', async () => {
    const { workspace, storeDirectory, take } = await snapshotted({ 'a.txt': 'a' });
    await take();
    const file = join(storeDirectory, 'cache', 'snapshot-v1');
    const cache = await readFile(file, 'utf8');
    await writeFile(file, cache.replace(digestBytes('a'), 'sha256:0'));
    await lay(workspace, { 'b.txt': 'b' });
    expect(await take()).toBe(await referenceTree(workspace));
  });

  it('a change record whose time was damaged to a later one is not used, so a change made before it is not missed', async () => {
    const { workspace, storeDirectory, take } = await snapshotted({ 'a.txt': 'a' });
    const before = await take({ isClocked: true });
    await sleep(20);
    await lay(workspace, { 'a.txt': 'changed' });
    await sleep(20);
    const file = join(storeDirectory, 'cache', 'changes-v3.json');
    const [digest, json] = (await readFile(file, 'utf8')).split('\n') as [string, string];
    const record = JSON.parse(json) as { clock: { wallNs: string } };
    record.clock.wallNs = String(BigInt(Date.now()) * 1_000_000n);
    await writeFile(file, `${digest}\n${JSON.stringify(record)}`);
    await sleep(5);
    const after = await take({ isClocked: true });
    expect(after).not.toBe(before);
    expect(after).toBe(await take());
  });

  it('a change record that is JSON but not an object is ignored by gc, not a TypeError', async () => {
    const { directory: storeDirectory } = await initStore(await makeTempDirectory());
    await mkdir(join(storeDirectory, 'cache'), { recursive: true });
    await writeFile(join(storeDirectory, 'cache', 'changes-v3.json'), 'null');
    expect(recordedTree(storeDirectory)).toBeUndefined();
    expect(await cachedReferences(storeDirectory)).toEqual([]);
  });
});
