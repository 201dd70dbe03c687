#!/usr/bin/env node
import { createRequire } from 'node:module';

// Node's modules by `require`: an `import` of one reads all its exports, loading lazy ones.
const require = createRequire(import.meta.url);
const { createHash } = require('node:crypto');
const { mkdirSync, readFileSync, renameSync, writeFileSync } = require('node:fs');
const { homedir } = require('node:os');
const { dirname, join } = require('node:path');
const { fileURLToPath } = require('node:url');
const { Script } = require('node:vm');

// `rewind --version` is answered before anything else loads: it needs only package.json.
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${version}\n`);
  process.exit(0);
}

/** Bundles compiled in this run whose code cache is still to be written. */
const uncached = [];

/**
 * Loads `dist/bundle/NAME.cjs` (scripts/bundle.mjs), with V8's code cache for it when an earlier
 * run left one: compiling the bundle is most of what the command would otherwise spend starting.
 * The cache lives in $XDG_CACHE_HOME/rewind-agent (else ~/.cache/rewind-agent), one file per
 * bundle content and Node version, so an upgrade never runs against a stale cache; V8 checks it
 * again and ignores one it cannot use. Set REWIND_CODE_CACHE=0 to go without.
 */
function loadBundle(name) {
  const file = fileURLToPath(new URL(`../dist/bundle/${name}.cjs`, import.meta.url));
  const source = readFileSync(file, 'utf8');
  let cacheFile;
  let cachedData;
  if (process.env.REWIND_CODE_CACHE !== '0') {
    const key = createHash('sha256').update(process.version).update(source).digest('hex');
    const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
    cacheFile = join(base, 'rewind-agent', `${name}-${key.slice(0, 32)}.v8`);
    try {
      cachedData = readFileSync(cacheFile);
    } catch {}
  }
  const wrapped = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new Script(wrapped, { filename: file, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
  if (cacheFile && (cachedData === undefined || script.cachedDataRejected))
    uncached.push({ script, cacheFile });
  return module.exports;
}

/**
 * Writes the code caches of this run's bundles, once the command has run: the cache then holds
 * the functions the command compiled on the way too. A cache that cannot be written is skipped.
 */
function writeCodeCaches() {
  for (const { script, cacheFile } of uncached) {
    const temporary = `${cacheFile}.${process.pid}.tmp`;
    try {
      mkdirSync(dirname(cacheFile), { recursive: true });
      writeFileSync(temporary, script.createCachedData());
      renameSync(temporary, cacheFile);
    } catch {}
  }
}

const { runCli } = loadBundle('cli');

/** Asks on the terminal; only when there is one, so scripts never hang waiting for an answer. */
async function prompt(question) {
  const { createInterface } = await import('node:readline/promises');
  const terminal = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await terminal.question(question);
  } finally {
    terminal.close();
  }
}

/** `rewind mcp`: the MCP server is an edge of its own (src/mcp), loaded only when asked for. */
async function serveMcp(argv) {
  const { runMcp } = loadBundle('mcp');
  writeCodeCaches(); // now: a server runs until it is stopped, often by a signal
  return runMcp(argv, process.cwd());
}

/** `rewind ui`: the web timeline's server is an edge of its own (src/ui), loaded only when asked for. */
async function serveUi(argv) {
  const { runUi } = loadBundle('ui');
  writeCodeCaches(); // now: a server runs until it is stopped, often by a signal
  return runUi(argv, {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    cwd: process.cwd(),
    assets: fileURLToPath(new URL('../dist/ui-assets', import.meta.url)),
  });
}

// A reader that stops early (`rewind log | head -1`) closes the pipe. Node ignores SIGPIPE, so
// the write fails with EPIPE instead: the rest of the output is dropped, quietly, as git does,
// and the command finishes and exits with its own code (what it did happened either way).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error) => {
    if (error.code !== 'EPIPE') throw error;
  });
}

/** Writes to `stream` while someone reads it. */
const writerOf = (stream) => (text) => {
  if (!stream.destroyed) stream.write(text);
};

process.exitCode = await runCli(argv, {
  stdout: writerOf(process.stdout),
  stderr: writerOf(process.stderr),
  cwd: process.cwd(),
  stdin: process.stdin,
  ...(process.stdin.isTTY && { prompt }),
  serveMcp,
  serveUi,
  isTerminal: process.stdout.isTTY === true,
  isErrorTerminal: process.stderr.isTTY === true,
  env: process.env,
});
writeCodeCaches();
