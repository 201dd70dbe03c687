// Generates a deterministic, repository-shaped workspace: nested directories, mostly 1-20 KiB
// text files (log-uniform), a few large incompressible binaries.
//   node bench/generate-workspace.mjs DIR FILES
// FILES 1000 ≈ 20 MB, 10000 ≈ 150 MB, 100000 ≈ 1 GB, as in reference/performance-baselines.md.
import { createCipheriv } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A small deterministic PRNG (mulberry32). */
export function random(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS =
  'const let function return import export from async await if else for while class new this value result error data index item list map set get'.split(
    ' ',
  );

function textOf(next, sizeBytes) {
  const lines = [];
  let length = 0;
  while (length < sizeBytes) {
    const words = Array.from(
      { length: 3 + Math.floor(next() * 9) },
      () => WORDS[Math.floor(next() * WORDS.length)],
    );
    const line = `${'  '.repeat(Math.floor(next() * 4))}${words.join(' ')};`;
    lines.push(line);
    length += line.length + 1;
  }
  return `${lines.join('\n')}\n`.slice(0, sizeBytes);
}

function binaryOf(index, sizeBytes) {
  const key = Buffer.alloc(32, index);
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16, 0));
  return Buffer.concat([cipher.update(Buffer.alloc(sizeBytes)), cipher.final()]);
}

export function generateWorkspace(directory, fileCount) {
  const next = random(fileCount);
  const directoryCount = Math.max(1, Math.round(fileCount / 12));
  const directories = [''];
  for (let index = 1; index < directoryCount; index++) {
    const parent = directories[Math.floor(next() * directories.length)];
    const depth = parent.split('/').length;
    const base =
      depth >= 8 ? directories[Math.floor(next() * Math.min(directories.length, 10))] : parent;
    directories.push(join(base, `dir${index}`));
  }
  for (const relative of directories) mkdirSync(join(directory, relative), { recursive: true });
  const binaryCount = fileCount >= 100_000 ? 20 : fileCount >= 10_000 ? 8 : 3;
  const binaryBytes = fileCount >= 100_000 ? 18e6 : fileCount >= 10_000 ? 10.6e6 : 4.5e6;
  const files = [];
  for (let index = 0; index < fileCount; index++) {
    const parent = directories[Math.floor(next() * directories.length)];
    const isBinary = index < binaryCount;
    const name = isBinary
      ? `asset${index}.bin`
      : `file${index}.${['ts', 'js', 'md', 'json'][index % 4]}`;
    const path = join(parent, name);
    const sizeBytes = Math.round(1024 * 20 ** next());
    writeFileSync(
      join(directory, path),
      isBinary ? binaryOf(index, Math.round(binaryBytes)) : textOf(next, sizeBytes),
    );
    files.push(path);
  }
  return files;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [directory, count] = process.argv.slice(2);
  mkdirSync(directory, { recursive: true });
  const files = generateWorkspace(directory, Number(count));
  console.log(`${files.length} files in ${directory}`);
}
