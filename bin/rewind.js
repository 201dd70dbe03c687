#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';

// `rewind --version` is answered before anything else loads: it needs only package.json.
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${version}\n`);
  process.exit(0);
}
const { runCli } = await import('../dist/cli/main.js');

/** Asks on the terminal; only when there is one, so scripts never hang waiting for an answer. */
async function prompt(question) {
  const terminal = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await terminal.question(question);
  } finally {
    terminal.close();
  }
}

/** `rewind mcp`: the MCP server is an edge of its own (src/mcp), loaded only when asked for. */
async function serveMcp(argv) {
  const { runMcp } = await import('../dist/mcp/main.js');
  return runMcp(argv, process.cwd());
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
  isTerminal: process.stdout.isTTY === true,
  isErrorTerminal: process.stderr.isTTY === true,
  env: process.env,
});
