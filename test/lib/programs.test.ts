import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runProgram } from '../../src/lib/programs.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const setting = process.env.REWIND_PROGRAM_SHELLS;
afterEach(() => {
  if (setting === undefined) delete process.env.REWIND_PROGRAM_SHELLS;
  else process.env.REWIND_PROGRAM_SHELLS = setting;
});

// Both ways a program runs: through the shells a large process keeps, and started directly.
describe.each(['1', '0'])('runProgram (REWIND_PROGRAM_SHELLS=%s)', (shells) => {
  const run = (file: string, args: string[]) => {
    process.env.REWIND_PROGRAM_SHELLS = shells;
    return runProgram(file, args);
  };

  it('passes arguments as they are and returns the output byte for byte', async () => {
    const words = ["it's", 'two\nlines', '$HOME `id` "q" \\ *', 'é ✓', ''];
    const { isStarted, status, stdout } = await run('printf', ['%s\\0', ...words]);
    expect({ isStarted, status }).toEqual({ isStarted: true, status: 0 });
    expect(stdout.toString()).toBe(words.map((word) => `${word}\0`).join(''));
  });

  it('returns output that ends like the end of a request, and large output, whole', async () => {
    const hex = '0123456789abcdef0123456789abcdef 0\n';
    expect((await run('printf', ['%s', hex])).stdout.toString()).toBe(hex);
    const zeros = await run('head', ['-c', '3000000', '/dev/zero']);
    expect(zeros.stdout.length).toBe(3_000_000);
    expect(zeros.stdout.every((byte) => byte === 0)).toBe(true);
  });

  it('reports the exit status, and a program that cannot be started', async () => {
    expect(await run('sh', ['-c', 'printf out; exit 3'])).toMatchObject({
      isStarted: true,
      status: 3,
    });
    expect((await run('sh', ['-c', 'printf out; exit 3'])).stdout.toString()).toBe('out');
    expect((await run('no-such-program-rewind', [])).isStarted).toBe(false);
  });

  it('runs programs side by side, more than there are shells, each with its own output', async () => {
    const results = await Promise.all(
      Array.from({ length: 7 }, (_, index) =>
        run('sh', ['-c', `sleep 0.0${index}; printf 'program %s' ${index}`]),
      ),
    );
    expect(results.map(({ stdout }) => stdout.toString())).toEqual(
      Array.from({ length: 7 }, (_, index) => `program ${index}`),
    );
  });

  it('gives a program an empty stdin and the PATH of the moment', async () => {
    expect((await run('cat', [])).stdout.length).toBe(0);
    const path = process.env.PATH;
    process.env.PATH = '/nowhere';
    try {
      expect((await run('sh', ['-c', 'exit 0'])).isStarted).toBe(false);
    } finally {
      process.env.PATH = path;
    }
    expect((await run('sh', ['-c', 'exit 0'])).isStarted).toBe(true);
  });
});

describe('the shells', () => {
  it('run a program again directly when its shell dies under it, and start another', async () => {
    process.env.REWIND_PROGRAM_SHELLS = '1';
    const marker = join(await makeTempDirectory(), 'ran');
    // Through a shell, the program kills that shell ($PPID); run again directly, it only prints.
    const script = `if [ -e '${marker}' ]; then printf again; else : > '${marker}'; kill -9 $PPID; fi`;
    const result = await runProgram('sh', ['-c', script]);
    expect(existsSync(marker)).toBe(true);
    expect(result.stdout.toString()).toBe('again');
    expect((await runProgram('printf', ['%s', 'after'])).stdout.toString()).toBe('after');
  });

  it('never keep a process alive that is done', async () => {
    const script = `
      process.env.REWIND_PROGRAM_SHELLS = '1';
      const { runProgram } = await import('${ROOT}dist/lib/programs.js');
      const { stdout } = await runProgram('printf', ['%s', 'done']);
      console.log(stdout.toString());
    `;
    const start = Date.now();
    const { code, stdout } = await runNode(['--input-type=module', '-e', script]);
    expect({ code, stdout: stdout.trim() }).toEqual({ code: 0, stdout: 'done' });
    expect(Date.now() - start).toBeLessThan(10_000);
  });
});
