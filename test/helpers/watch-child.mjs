// Opens a session that watches the workspace, takes a checkpoint, then dies by SIGKILL without
// closing it: the watcher's inotifywait must end with it.
//   node watch-child.mjs WORKSPACE
import { openSession } from '../../dist/index.js';

const [workspace] = process.argv.slice(2);
const session = await openSession({ workspace, watch: true });
await session.checkpoint('from-the-child');
await new Promise((resolve) => setTimeout(resolve, 500));
process.kill(process.pid, 'SIGKILL');
