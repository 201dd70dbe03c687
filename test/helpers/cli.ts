import { Readable } from 'node:stream';
import { runCli } from '../../src/cli/main.js';

/**
 * Runs the CLI in this process; `stdin` feeds standard input, `answer` answers any prompt,
 * `isErrorTerminal` makes stderr a terminal, `env` is the environment it sees.
 */
export async function rewind(
  cwd: string,
  argv: string[],
  extra: {
    stdin?: string;
    answer?: string;
    isErrorTerminal?: boolean;
    env?: Record<string, string | undefined>;
  } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
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
    ...(extra.stdin !== undefined && { stdin: Readable.from([Buffer.from(extra.stdin)]) }),
    ...(extra.answer !== undefined && { prompt: async () => extra.answer as string }),
    ...(extra.isErrorTerminal && { isErrorTerminal: true }),
    ...(extra.env && { env: extra.env }),
  });
  return { code, stdout, stderr };
}
