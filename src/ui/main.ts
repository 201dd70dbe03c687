/**
 * `rewind ui [--port N] [--open] [--root DIR]`: serves the web timeline of the workspace until
 * interrupted, printing the page's address (with the launch's token) on stdout.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isRewindError, locateWorkspace } from '../index.js';
import { startUi } from './server.js';

const USAGE = `Usage: rewind ui [--port N] [--open] [--root DIR]

Serves a web page of the workspace's sessions on 127.0.0.1: the timeline of every session
(checkpoints, actions, rollbacks, undos, refusals, verifications), what each changed, the
conversation a checkpoint recorded, and the actions a person may take (rollback, undo, approve,
discard, compensate, commit), each confirmed first. New entries appear as the agent works.

The address printed holds a random token for this launch: only a browser given it can use the
page. --port picks the port (default: a free one); --open opens it in the default browser.
`;

/** What `rewind ui` prints and where it reads; the command line gives process's own. */
export interface UiIo {
  stdout(text: string): void;
  stderr(text: string): void;
  cwd: string;
  /** The page's built files (dist/ui-assets of the package). */
  assets: string;
}

/** Opens `url` in the person's browser, if the system has a way to; never waits for it. */
function openBrowser(url: string): void {
  const command =
    process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  const child = spawn(command, [url], { detached: true, stdio: 'ignore' });
  child.on('error', () => {});
  child.unref();
}

/** Runs `rewind ui` until SIGINT or SIGTERM; resolves with the exit code. */
export async function runUi(argv: readonly string[], io: UiIo): Promise<number> {
  let values: { port?: string; open?: boolean; root?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        port: { type: 'string' },
        open: { type: 'boolean' },
        root: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (error) {
    io.stderr(`rewind ui: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    io.stdout(USAGE);
    return 0;
  }
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    io.stderr(`rewind ui: --port must be a port number (0 to 65535), not ${values.port}.\n`);
    return 2;
  }
  let running: Awaited<ReturnType<typeof startUi>>;
  try {
    const workspace = await locateWorkspace(resolve(io.cwd, values.root ?? '.'));
    running = await startUi({ workspace, assets: io.assets, port });
  } catch (error) {
    if (isRewindError(error)) {
      io.stderr(`rewind ui: ${error.message} [${error.code}]\n`);
      return 1;
    }
    if ((error as { code?: string }).code === 'EADDRINUSE') {
      io.stderr(`rewind ui: port ${port} is taken; pick another with --port, or leave it out.\n`);
      return 1;
    }
    throw error;
  }
  io.stdout(`Rewind's timeline: ${running.url}\n(Ctrl-C stops it.)\n`);
  if (values.open) openBrowser(running.url);
  await new Promise<void>((done) => {
    const stop = () => done();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  if (running.running > 0) {
    io.stderr(
      `rewind ui: waiting for what the page asked to finish (${running.running} running); Ctrl-C again stops at once, and the next rewind command finishes or undoes a rollback cut off.\n`,
    );
  }
  await running.close();
  return 0;
}
