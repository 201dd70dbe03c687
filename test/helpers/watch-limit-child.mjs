// Opens a session that watches the workspace and prints, one a line, what onWatchStopped was
// told within 5 s, then closes it. Run with few inotify watches allowed (see watch-limit.test.ts).
//   node watch-limit-child.mjs WORKSPACE
import { openSession } from '../../dist/index.js';

const [workspace] = process.argv.slice(2);
const session = await openSession({
  workspace,
  watch: true,
  onWatchStopped: (why) => process.stdout.write(`${why}\n`),
});
for (let waited = 0; waited < 5_000; waited += 100) {
  await new Promise((resolve) => setTimeout(resolve, 100));
}
await session.close();
