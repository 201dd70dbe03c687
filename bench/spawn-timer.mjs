// Times commands run as processes from a small process of their own. A benchmark that holds a
// large workspace's session in memory is a large process, and the kernel copies its page tables
// for every child it starts: at 100,000 files that added 60 to 90 ms to each `rewind` process it
// ran (the child's own clock said it was done that much sooner), which a shell or an agent's
// runtime does not pay. Run as a script, it times each `{ file, args, cwd, env }` line on stdin
// and answers one `{ ms, status, stderr }` line; `startSpawnTimer` starts one and returns `run`.
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const isScript = process.argv[1] === fileURLToPath(import.meta.url);
if (isScript) {
  for await (const line of createInterface({ input: process.stdin })) {
    const { file, args, cwd, env } = JSON.parse(line);
    const start = process.hrtime.bigint();
    const result = spawnSync(file, args, { cwd, env: { ...process.env, ...env } });
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    process.stdout.write(
      `${JSON.stringify({ ms, status: result.status, stderr: result.stderr.toString() })}\n`,
    );
  }
}

/**
 * Starts a timer process; `run(file, args, { cwd, env })` resolves with how long the command
 * took, in ms, and throws when it failed. `close()` ends the timer.
 */
export function startSpawnTimer() {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    async run(file, args, { cwd, env = {} }) {
      child.stdin.write(`${JSON.stringify({ file, args, cwd, env })}\n`);
      const { value } = await answers.next();
      const { ms, status, stderr } = JSON.parse(value);
      if (status !== 0) throw new Error(`${file} ${args.join(' ')}: ${stderr}`);
      return ms;
    },
    close: () => child.stdin.end(),
  };
}
