import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { init, openSession } from '../../src/index.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { hasInotifywait } from '../helpers/watching.js';
import { lay } from '../helpers/workspace.js';

describe.runIf(process.platform === 'linux' && hasInotifywait)(
  'a watched session torn down',
  () => {
    it('stops its watcher before destroying its view: nothing of the view is made again, nothing is said', async () => {
      const workspace = await makeTempDirectory();
      await lay(workspace, { 'src/a.ts': 'a\n', 'src/deep/b.ts': 'b\n' });
      await init({ workspace });
      for (let round = 0; round < 3; round++) {
        const told: string[] = [];
        const session = await openSession({
          workspace,
          isolation: 'isolated',
          watch: true,
          onWatchStopped: (why) => told.push(why),
        });
        const view = join(workspace, '.rewind', 'views', session.id);
        await session.checkpoint('start');
        // Until the watch is live, so that it would hear the removal.
        await sleep(500);
        await session.destroy({ force: true });
        await sleep(700);
        expect(existsSync(view), `round ${round}`).toBe(false);
        expect(told).toEqual([]);
      }
    });
  },
);
