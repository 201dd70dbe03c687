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

const argv = process.argv.slice(2);
if (argv[0] === 'mcp') {
  // The MCP server is an edge of its own (src/mcp), not a CLI command: it speaks the protocol.
  const { runMcp } = await import('../dist/mcp/main.js');
  process.exitCode = await runMcp(argv.slice(1), process.cwd());
} else {
  process.exitCode = await runCli(argv, {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    cwd: process.cwd(),
    stdin: process.stdin,
    ...(process.stdin.isTTY && { prompt }),
  });
}
