#!/usr/bin/env node
import { createInterface } from 'node:readline/promises';
import { runCli } from '../dist/cli/main.js';

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

process.exitCode = await runCli(process.argv.slice(2), {
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
