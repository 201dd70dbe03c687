import { type ChildProcess, spawn } from 'node:child_process';

/** A `rewind ui` process, started as a person starts it, and the page's address it printed. */
export interface UiProcess {
  url: string;
  child: ChildProcess;
  /** Stops it (SIGTERM) and resolves with its exit code. */
  stop(): Promise<number | null>;
}

/** Starts `command ...args` (a `rewind ui`), resolving once it prints the page's address. */
export function startUiProcess(
  command: string,
  args: readonly string[],
  cwd: string,
): Promise<UiProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const exited = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /http:\/\/\S+\?token=\S+/.exec(output)?.[0];
      if (url) {
        resolve({
          url,
          child,
          stop: () => {
            child.kill('SIGTERM');
            return exited;
          },
        });
      }
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('error', reject);
    void exited.then((code) =>
      reject(new Error(`rewind ui exited (${code}) before serving:\n${output}`)),
    );
  });
}

/**
 * Loads the page as a browser would, without one: the address with the token (a cookie comes
 * back), then the page and its script with that cookie. Resolves with each answer's status.
 */
export async function loadPage(
  url: string,
): Promise<{ page: number; script: number; type: string }> {
  const first = await fetch(url, { redirect: 'manual' });
  const cookie = (first.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const base = url.slice(0, url.indexOf('/?'));
  const page = await fetch(`${base}/`, { headers: { cookie } });
  const script = await fetch(`${base}/app.js`, { headers: { cookie } });
  return {
    page: page.status,
    script: script.status,
    type: script.headers.get('content-type') ?? '',
  };
}
