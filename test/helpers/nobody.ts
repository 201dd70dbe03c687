// Running Rewind as an unprivileged user: root reads and writes anything, so permission cases
// need another user.
import { spawn } from 'node:child_process';
import { chmod, chown, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from './processes.js';
import { makeTempDirectory } from './temp.js';
import { lay } from './workspace.js';

const NOBODY = 65534;

/** Hands a directory and everything in it to the unprivileged user (root reads anything). */
async function giveToNobody(path: string): Promise<void> {
  await chown(path, NOBODY, NOBODY);
  if ((await stat(path)).isDirectory()) {
    for (const name of await readdir(path)) await giveToNobody(join(path, name));
  }
}

/**
 * Runs `body` (an async function body given `api`, `fs`, `workspace` and `out`) as the
 * unprivileged user, with the built package, and returns what it put in `out`.
 */
export async function runAsNobody(
  workspace: string,
  body: string,
): Promise<Record<string, unknown>> {
  const script = `
    import * as fs from 'node:fs';
    const api = await import('${ROOT}dist/index.js');
    const workspace = ${JSON.stringify(workspace)};
    const out = {};
    try { ${body} } catch (error) { out.error = { code: error.code, message: error.message }; }
    console.log(JSON.stringify(out));`;
  const output = await new Promise<string>((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      ...(process.getuid?.() === 0 && { uid: NOBODY, gid: NOBODY }),
      cwd: '/',
    });
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      text += chunk;
    });
    child.on('close', () => resolve(text));
  });
  try {
    return JSON.parse(output.trim().split('\n').at(-1) as string);
  } catch {
    throw new Error(`The child printed: ${output}`);
  }
}

/** A fresh workspace with the given files, owned by the unprivileged user. */
export async function workspaceOfNobody(layout: Record<string, string>): Promise<string> {
  const workspace = await makeTempDirectory();
  await lay(workspace, layout);
  await chmod(join(workspace, '..'), 0o755).catch(() => {});
  await chmod(workspace, 0o755);
  await giveToNobody(workspace);
  return workspace;
}
