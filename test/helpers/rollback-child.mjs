// Rolls a workspace back and kills itself with SIGKILL once `killAfter` paths are done:
//   node rollback-child.mjs WORKSPACE LABEL KILL_AFTER
import { openSession } from '../../dist/index.js';

const [workspace, label, killAfter] = process.argv.slice(2);
const session = await openSession({ workspace });
await session.rollback(label, {
  onProgress: ({ done }) => {
    if (done === Number(killAfter)) process.kill(process.pid, 'SIGKILL');
  },
});
console.log('finished without being killed');
