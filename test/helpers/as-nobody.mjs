// Runs a script as the unprivileged user when started as root, so that whatever a fuzz test
// throws at Rewind can reach no more than that user may write:
//   node test/helpers/as-nobody.mjs SCRIPT [ARGS...]
// The script sees ARGS as process.argv.slice(2), as if it had been started itself.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const NOBODY = 65534;

if (process.getuid?.() === 0) {
  process.setgroups([]);
  process.setgid(NOBODY);
  process.setuid(NOBODY);
}
const [script] = process.argv.splice(2, 1);
await import(pathToFileURL(resolve(script)).href);
