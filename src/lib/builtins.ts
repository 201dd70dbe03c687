// Node's modules that most commands never use, loaded on first use rather than with the module
// that uses them. The `rewind` command is one bundle whose modules all load as it starts
// (scripts/bundle.mjs): loading node:crypto cost ~3 ms and ~200 page faults there, zlib and
// worker_threads ~1 ms more, which `rewind status` and `rewind log` never need
// (docs/performance.md; test/cli/code-cache.test.ts holds them to it). Node keeps a module once
// loaded: later calls cost a lookup.

/** `node:crypto`, loaded on first use. */
export function nodeCrypto(): typeof import('node:crypto') {
  return process.getBuiltinModule('node:crypto');
}

/** `node:zlib`, loaded on first use. */
export function nodeZlib(): typeof import('node:zlib') {
  return process.getBuiltinModule('node:zlib');
}

/** `node:worker_threads`, loaded on first use. */
export function workerThreads(): typeof import('node:worker_threads') {
  return process.getBuiltinModule('node:worker_threads');
}

/** `node:net` (and with it Node's stream machinery), loaded on first use. */
export function nodeNet(): typeof import('node:net') {
  return process.getBuiltinModule('node:net');
}
