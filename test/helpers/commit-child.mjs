// Commits an isolated session and kills itself with SIGKILL once `killAfter` paths are done:
//   node commit-child.mjs WORKSPACE SESSION KILL_AFTER
import { openSession } from '../../dist/index.js';

const [workspace, session, killAfter] = process.argv.slice(2);
const opened = await openSession({ workspace, session });
await opened.commit({
  onProgress: ({ done }) => {
    if (done === Number(killAfter)) process.kill(process.pid, 'SIGKILL');
  },
});
console.log('finished without being killed');
