// inotifywait as the watcher runs it: what it asks for, how it is started, what it prints.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { ownTemporaryFiles } from './restore-file.js';

/**
 * The events asked for: whatever changes an entry or a directory's list of names. `q_overflow`
 * is asked for by name, since inotifywait prints only the events asked for: a queue that
 * overflowed (events lost) must be seen.
 */
const EVENTS =
  'modify,attrib,create,delete,delete_self,moved_from,moved_to,move_self,unmount,q_overflow';

/** The events that change the names a directory holds. */
export const RENAMING_EVENTS = new Set([
  'CREATE',
  'DELETE',
  'MOVED_FROM',
  'MOVED_TO',
  'DELETE_SELF',
  'MOVE_SELF',
]);

/** An event record longer than this may have been cut at inotifywait's 4,096-byte buffer. */
export const LONGEST_RECORD = 4_000;

/** Runs inotifywait in place of the shell, made to end with its parent where setpriv can. */
const INOTIFYWAIT =
  'if command -v setpriv >/dev/null 2>&1; then exec setpriv --pdeathsig KILL -- inotifywait "$@" 2>&1; fi; exec inotifywait "$@" 2>&1';

/** What inotifywait prints once every directory has its watch. */
export const ESTABLISHED = Buffer.from('Watches established.\n');

/**
 * Starts inotifywait on the workspace `root` and the `sentinels` directory, leaving out the
 * directories at the relative paths `excluded`: it prints each event as `EVENTS PATH` and a NUL, and its
 * errors into the same pipe, in the order it wrote them. Throws when it cannot be spawned.
 */
export function spawnInotifywait(
  root: string,
  sentinels: string,
  excluded: Iterable<string>,
): ChildProcess {
  // The rules leave `.git` and `.rewind` out too: they are among these when they are there.
  const skipped = [...excluded].map((name) => `@${root}/${name}`);
  // The temporary files this process's restores write and rename into place are left out:
  // four or five events each, which it would print and the watcher read, to no end.
  // biome-ignore format: the command reads best on one line
  const args = ['-m', '-r', '-P', '--format', '%e %w%f%0', '--no-newline', '-e', EVENTS, '--exclude', ownTemporaryFiles(), root, sentinels, ...skipped];
  // It ends with this process (setpriv's parent-death signal), even one killed or that never
  // closed its session: otherwise it would wait on until an event made it write to a closed pipe.
  return spawn('sh', ['-c', INOTIFYWAIT, 'sh', ...args], { stdio: ['ignore', 'pipe', 'ignore'] });
}

/** The sysctl that caps a user's inotify watches, all of its processes together. */
const WATCH_LIMIT = 'fs.inotify.max_user_watches';

/**
 * What to tell when inotifywait ran out of inotify watches: the setting, its value, the command
 * that raises it, and that checkpoints walk meanwhile.
 */
export function watchLimitMessage(): string {
  let now: number | undefined;
  try {
    now = Number.parseInt(
      readFileSync(`/proc/sys/${WATCH_LIMIT.replaceAll('.', '/')}`, 'latin1'),
      10,
    );
  } catch {}
  const raised = Math.max(524_288, 2 * (now ?? 0));
  return (
    `the inotify watch limit was reached (${WATCH_LIMIT} is ${now ?? 'unknown'}, for all of this user's processes together; one watch per directory). ` +
    `Raise it with \`sudo sysctl ${WATCH_LIMIT}=${raised}\` (to keep it after a reboot: \`echo ${WATCH_LIMIT}=${raised} | sudo tee /etc/sysctl.d/60-inotify.conf\`), then reopen the session (start \`rewind daemon\` or \`rewind mcp\` again). ` +
    'Until then Rewind falls back to walking the workspace at every checkpoint.'
  );
}
