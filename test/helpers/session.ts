import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { init, openSession } from '../../src/session/index.js';
import { createObjectStore } from '../../src/store/index.js';
import { snapshot } from '../../src/workspace/index.js';
import { makeTempDirectory } from './temp.js';
import { type Layout, lay } from './workspace.js';

/**
 * A fresh workspace with the given files, a store, an open session (closed when the test ends,
 * passed or not), and a way to digest its state.
 */
export async function sessionOn(layout: Layout) {
  const workspace = await makeTempDirectory();
  await lay(workspace, layout);
  await init({ workspace });
  const session = await openSession({ workspace });
  onTestFinished(() => session.close());
  const store = createObjectStore(join(workspace, '.rewind'));
  const stateOf = async () =>
    (await snapshot(workspace, { store, storeDirectory: join(workspace, '.rewind') })).tree;
  return { workspace, session, store, stateOf };
}
