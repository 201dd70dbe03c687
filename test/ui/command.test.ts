import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { init } from '../../src/index.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { loadPage, startUiProcess } from '../helpers/ui.js';

const BIN = join(ROOT, 'bin', 'rewind.cjs');

describe('rewind ui, the command', () => {
  it('serves the page on loopback with a token in the address, until stopped', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    const ui = await startUiProcess(process.execPath, [BIN, 'ui', '--port', '0'], workspace);
    try {
      expect(ui.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{43}$/);
      expect(await loadPage(ui.url)).toEqual({
        page: 200,
        script: 200,
        type: 'text/javascript; charset=utf-8',
      });
      // Without the token, nothing.
      expect((await fetch(ui.url.replace(/\?token=.*/, ''))).status).toBe(401);
    } finally {
      expect(await ui.stop()).toBe(0);
    }
  });

  it('says what to do in a directory without a store, and for a bad port', async () => {
    const empty = await makeTempDirectory();
    const missing = await runNode([BIN, 'ui'], { cwd: empty });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/rewind init/);
    // The option of `rewind ui` is --root; the message named the CLI's --dir.
    expect(missing.stderr).toContain('--root for `rewind ui`');
    const port = await runNode([BIN, 'ui', '--port', 'eighty'], { cwd: empty });
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('--port must be a port number');
    const help = await runNode([BIN, 'help', 'ui'], { cwd: empty });
    expect(help.stdout).toContain('Usage: rewind ui');
  });
});
