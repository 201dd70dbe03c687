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

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  cwd: process.cwd(),
  stdin: process.stdin,
  ...(process.stdin.isTTY && { prompt }),
  serveMcp,
});
