// The end-to-end demo: copies examples/sample-project to a temporary directory and drives the
// real `rewind` binary through it. Exits non-zero if any step does not behave as it should.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = join(root, 'bin', 'rewind.js');
const workspace = mkdtempSync(join(tmpdir(), 'rewind-demo-'));
cpSync(join(root, 'examples', 'sample-project'), workspace, { recursive: true });

function rewind(args, expectedCode = 0) {
  console.log(`\n$ rewind ${args.join(' ')}`);
  const result = spawnSync(process.execPath, [bin, ...args], { cwd: workspace, encoding: 'utf8' });
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  if (result.status !== expectedCode) {
    console.error(
      `\ndemo failed: \`rewind ${args.join(' ')}\` exited ${result.status}, expected ${expectedCode}`,
    );
    process.exit(1);
  }
  return result.stdout;
}

console.log(`Workspace: ${workspace}`);
rewind(['init', '--hash-chain']);
writeFileSync(join(workspace, 'test-output.txt'), 'greet: 1 passed, 0 failed\n');
rewind(['note', 'baseline: tests pass', '--attach', 'test-output.txt']);
rewind(['status']);
rewind(['log']);
rewind(['verify']);
rewind(['gc', '--dry-run']);
const status = JSON.parse(rewind(['status', '--json']));
if (status.sessions[0]?.entryCount !== 2 || status.objects.count !== 1) {
  console.error('\ndemo failed: the store does not hold the session and attachment it should');
  process.exit(1);
}
console.log(`\nDemo complete. Explore it yourself: cd ${workspace} && node ${bin} log`);
