// Runs the built `rewind` command line on request, in one process: each line on stdin is
// {"argv": [...], "cwd": "..."}; each answer on stdout is {"code", "stdout", "stderr"}. An
// exception or rejection that escapes runCli ends the process, which the test sees as a crash.
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';

const { runCli } = await import(new URL('../../dist/cli/main.js', import.meta.url).href);

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const { argv, cwd } = JSON.parse(line);
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    cwd,
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    stdin: Readable.from([]),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    isTerminal: false,
    isErrorTerminal: false,
  });
  process.stdout.write(`${JSON.stringify({ code, stdout, stderr })}\n`);
}
