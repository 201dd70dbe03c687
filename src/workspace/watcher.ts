// A watch of a workspace by inotify, kept by a long-lived process: the next snapshot learns what
// changed from the events instead of a find over every entry.
import type { ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { createLimiter, decodeName, nodeCrypto } from '../lib/index.js';
import type { TreeEntry } from '../store/index.js';
import { type ChangeRecord, isOnTrustedFilesystem } from './changes.js';
import type { OutsideRules } from './ignore-rules.js';
import {
  ESTABLISHED,
  LONGEST_RECORD,
  RENAMING_EVENTS,
  spawnInotifywait,
  watchLimitMessage,
} from './inotifywait.js';
import { firstUnwatchedListed, listForWatch, walkMade, watchedInodes } from './watch-coverage.js';
import type { Drained, DrainResult, WrittenFile } from './watch-drain.js';
import {
  canEnter,
  cannotWatch,
  ctimeIn,
  ignoredDirectories,
  isIgnoreFile,
  isLeftOut,
  lstatIn,
  parentOf,
  realRoot,
  sentinelsIn,
  WatchedRules,
} from './watch-places.js';
import { IgnoredSinceStart, RestartPacer, TOLD_AFTER } from './watch-restarts.js';

/** How long a sentinel may take to come back before the watcher is taken as lost. */
const DRAIN_TIMEOUT_MS = 5_000;

/**
 * A watch of a workspace by Debian's `inotifywait` (inotify-tools), for a process that takes many
 * snapshots (a library user, `rewind mcp`): {@link drain} says which paths changed since the
 * previous drain, so a snapshot looks at only those, without the walk `find` does over every
 * entry. Node's own `fs.watch` is not used: it drops inotify's queue overflow, so a burst of
 * events (an `npm install`, a checkout) would go unnoticed.
 *
 * The answer is given only when it is known to be whole: the watches were all in place at the
 * previous drain, and nothing since may have gone unseen. Anything that could have makes the next
 * drain answer undefined, and the watcher starts again; the snapshot then asks find: a queue
 * overflow, a directory moved (inotifywait renames the paths of the watches under it as it walks
 * its own tree of them, which it changes as it goes, and misses some), an error of inotifywait,
 * a sentinel that did not come back, the workspace unmounted or moved, a directory without a
 * watch. inotifywait sets up the watches of a tree (at its start, and for a directory made or
 * moved in) by a walk that misses a directory made meanwhile in one it has listed but not yet
 * watched; such a directory would stay unwatched, so the watches are compared with the
 * directories there are (the kernel lists a process's watches in its fdinfo): the whole tree
 * before the watcher goes live, and at every drain what was made or moved in since the previous.
 * Files with more than one link are compared by their ctime at every drain, since a write
 * through another link reaches no watch of the workspace.
 *
 * Never throws: where inotifywait is missing, the platform is not Linux or the filesystem is not
 * one whose events are trusted, every drain answers undefined.
 */
export class WorkspaceWatcher {
  readonly root: string;
  /** The snapshot taken after the last drain, which the next snapshot may update. */
  #base: ChangeRecord | undefined;
  /** Drains so far: the last one's number is the token {@link setBase} takes. */
  #drains = 0;
  readonly #storeDirectory: string;
  readonly #sentinels: string;
  /** The root's and the sentinel directory's bytes, as event paths begin with them. */
  readonly #rootBytes: Buffer;
  readonly #sentinelsBytes: Buffer;
  readonly #token = nodeCrypto().randomBytes(6).toString('hex');
  #outside: OutsideRules;
  /** The ignore rules of the workspace's directories, as of the last event of an ignore file. */
  #rules: WatchedRules;
  /** The directories left unwatched (relative paths), as of the last start. */
  #excluded = new Set<string>();
  /** Those among them left unwatched because this process could not enter them. */
  #unreadable = new Set<string>();
  #child: ChildProcess | undefined;
  /** `starting` until inotifywait says its watches are set up; `checking` while they are checked. */
  #state: 'starting' | 'checking' | 'live' | 'stopped' = 'stopped';
  /** Bumped at every start, so output of a watcher that was replaced is ignored. */
  #generation = 0;
  #pending: Buffer = Buffer.alloc(0);
  #changed = new Set<string>();
  #made = new Set<string>();
  /** Paths with an event other than a file moved to them, since the last drain. */
  #touched = new Set<string>();
  /** Files this process wrote since the last drain: see {@link wrote}. */
  #written = new Map<string, WrittenFile>();
  /** The watcher was live, and checked, at the last drain, and nothing went unseen since. */
  #wasLiveAtDrain = false;
  /** Files with more than one link, by path, and their ctime at the last drain. */
  #linked = new Map<string, bigint>();
  #sentinelCount = 0;
  /** The sentinel waited for, and what to do the moment it comes back. */
  #waiter: { name: string; arrived: (hasArrived: boolean) => void } | undefined;
  readonly #oneAtATime = createLimiter(1);
  /** How soon it starts again after a loss or a failed start. */
  readonly #pacer = new RestartPacer();
  /** Directories left out by the ignore rules made since the start: see {@link IgnoredSinceStart}. */
  readonly #ignoredSince = new IgnoredSinceStart(() => this.#lose('ignored directories', false));
  /** Why the watcher stopped for good, when it did. */
  stoppedBecause: string | undefined;

  /**
   * Told why, once, when the watcher stops for good (not when it is closed: `isRetrying` false),
   * and once when it keeps failing to start again (`isRetrying`: it goes on trying, see
   * {@link RestartPacer}).
   */
  readonly #onStopped: ((why: string, isRetrying: boolean) => void) | undefined;
  /** Told when the watch is live again after {@link #onStopped} was told it kept failing. */
  readonly #onResumed: (() => void) | undefined;
  #isToldFailing = false;
  /** Told each time the watch goes live: see {@link onLive}. */
  #onLive: (() => void) | undefined;

  constructor(
    root: string,
    storeDirectory: string,
    outside: OutsideRules,
    onStopped?: (why: string, isRetrying: boolean) => void,
    onResumed?: () => void,
  ) {
    this.#onStopped = onStopped;
    this.#onResumed = onResumed;
    this.root = realRoot(root);
    this.#storeDirectory = storeDirectory;
    this.#sentinels = sentinelsIn(storeDirectory);
    this.#rootBytes = Buffer.from(this.root);
    this.#sentinelsBytes = Buffer.from(`${this.#sentinels}/`);
    this.#outside = outside;
    this.#rules = new WatchedRules(this.root, outside);
    if (process.platform !== 'linux') this.#stop('inotify is Linux only');
    else if (!isOnTrustedFilesystem(root)) this.#stop('the filesystem is not one it trusts');
    else this.#start(true);
  }

  /** True once the watches are in place and checked (and the files with several links listed). */
  get isLive(): boolean {
    return this.#state === 'live';
  }

  /** Has `listener` told each time the watch goes live: once started, and after each restart. */
  onLive(listener: () => void): void {
    this.#onLive = listener;
  }

  /** True when the next drain can answer: a live snapshot's record kept, no event lost since. */
  get canAnswer(): boolean {
    return this.#base !== undefined && this.#wasLiveAtDrain;
  }

  /** The process id of inotifywait while it runs. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /**
   * Keeps `record`, the snapshot taken after the drain `token` names, for the next drain to hand
   * to the next snapshot; ignored when another drain came since (a snapshot that ran meanwhile
   * took the events this one's record does not hold).
   */
  setBase(record: ChangeRecord, token: number): void {
    if (token === this.#drains) this.#base = record;
  }

  /**
   * Waits until inotifywait has reported every change made before this call (a sentinel file is
   * created and waited for: one inotify queue delivers in order). Returns the paths (relative
   * to the root, '' for the root) that changed since the previous drain, with the directories in
   * which a name was made, removed or moved (a superset; not for a file moved in alone), or
   * undefined when that list may not be whole; the record of the snapshot taken after the
   * previous drain, which they update (see {@link setBase}); and this drain's token.
   */
  drain(): Promise<DrainResult> {
    return this.#oneAtATime(async () => {
      const token = ++this.#drains;
      const base = this.#base;
      this.#base = undefined;
      const drained = await this.#drain();
      const written = new Map<string, WrittenFile>();
      if (drained) {
        for (const [path, file] of drained.written) {
          if (drained.changed.has(path) && !drained.touched.has(path)) written.set(path, file);
        }
      }
      return {
        paths: drained && [...drained.changed],
        base,
        token,
        written,
        stats: drained?.stats ?? new Map(),
      };
    });
  }

  /**
   * Told by a restore of this process that it wrote `entry`'s file beside `path` (relative) and
   * renamed it there, its stat before the rename saying `contentStat` (see `contentStatOf`). The
   * next drain hands it on when the only event at that path since the previous drain is a file
   * moved to it: nothing wrote to it or changed its mode since, so if its stat still says the
   * same (the same file, not another renamed over it) it holds what was written, and the
   * snapshot need not read it again. A write within the same tick of the filesystem's clock could
   * leave the stat as it was, but not the events.
   */
  wrote(path: string, contentStat: string, entry: TreeEntry & { type: 'file' }): void {
    if (this.#state === 'live') this.#written.set(path, { contentStat, entry });
  }

  async #drain(): Promise<Drained | undefined> {
    if (this.#state !== 'live') {
      this.#resetDrain(false);
      return undefined;
    }
    let drained: Drained | undefined;
    const hasArrived = await this.#barrier(() => {
      drained = {
        changed: this.#changed,
        made: this.#made,
        touched: this.#touched,
        written: this.#written,
        isWhole: this.#wasLiveAtDrain,
        stats: new Map(),
      };
      this.#resetDrain(true);
    });
    if (!hasArrived || drained === undefined) return undefined;
    if (drained.isWhole) this.#pacer.steady();
    const { changed, made, touched, isWhole } = drained;
    // Directories made or moved in got their watches by a walk that may have missed some; the
    // files in them with several links are compared by ctime from now on, as below.
    if (made.size > 0) {
      const watched = watchedInodes(this.pid ?? -1);
      const walked = watched && walkMade(this.root, made, watched, this.#excluded, this.#rules);
      if (walked === undefined || walked.unwatched !== undefined) {
        this.#lose('a directory was left without a watch');
        return undefined;
      }
      for (const path of walked.ignored) this.#ignoredSince.add(path);
      for (const path of walked.linked) {
        if (!this.#linked.has(path)) this.#linked.set(path, ctimeIn(this.root, path) ?? -1n);
      }
    }
    // A write through another link of a file reaches no watch of the workspace: files with
    // several links are compared by their ctime. A file that has several links now and had one
    // (a link made beside it) has others nobody reported: find answers, and the watch starts again
    // (which lists them).
    for (const [path, ctime] of this.#linked) {
      const now = ctimeIn(this.root, path) ?? -1n;
      if (now !== ctime) {
        changed.add(path);
        touched.add(path);
        changed.add(parentOf(path));
        this.#linked.set(path, now);
      }
    }
    for (const path of changed) {
      if (this.#linked.has(path)) continue;
      const stats = lstatIn(this.root, path);
      if (stats !== undefined) drained.stats.set(path, stats);
      if (!stats || stats.isDirectory() || stats.nlink < 2n) continue;
      this.#lose('a file has another link now', false);
      return undefined;
    }
    return isWhole ? drained : undefined;
  }

  /**
   * Writes a sentinel and waits for inotifywait to report it, calling `arrived` the moment it
   * does (before any later event is handled); false when it did not come back.
   */
  async #barrier(arrived: () => void): Promise<boolean> {
    const name = `${this.#token}-${++this.#sentinelCount}`;
    const sentinel = join(this.#sentinels, name);
    const came = new Promise<boolean>((resolve) => {
      this.#waiter = {
        name,
        arrived: (hasArrived) => {
          if (hasArrived) arrived();
          resolve(hasArrived);
        },
      };
    });
    // A ref'd timer also keeps the process alive while it waits (the pipe is unref'd).
    const timer = setTimeout(() => this.#lose('a sentinel did not come back'), DRAIN_TIMEOUT_MS);
    try {
      writeFileSync(sentinel, '', { flag: 'wx' });
    } catch {
      this.#lose('a sentinel could not be written');
    }
    const hasArrived = await came;
    clearTimeout(timer);
    rmSync(sentinel, { force: true });
    return hasArrived;
  }

  /**
   * Called after a snapshot that had to look at every entry (the first one, rules that changed):
   * starts the watch again when what it leaves unwatched may have changed: the ignore rules now
   * leave out other directories than those it left out when it started (or it cannot enter
   * others: see `canEnter`). Otherwise the watch goes on: starting it again would cost the next
   * two snapshots their watch (the first after a start must ask find: see {@link drain}), a find
   * each over every entry.
   */
  startAgain(outside: OutsideRules): void {
    this.#outside = outside;
    this.#rules = new WatchedRules(this.root, outside);
    if (this.#state === 'stopped') return;
    const excluded = ignoredDirectories(this.root, this.#outside);
    const isSame =
      excluded.length === this.#excluded.size && excluded.every((name) => this.#excluded.has(name));
    // Directories left out since the start (their events dropped) may be kept by the rules now.
    const isToStart = !isSame || this.#ignoredSince.size > 0;
    if (isToStart) this.#lose('a snapshot looked at every entry', false);
  }

  close(): void {
    this.#stop('closed', false);
  }

  /**
   * Starts inotifywait: at first (`isFirst`), or again after something may have gone unseen. A
   * workspace or store gone (deleted, or being deleted: their removal is what made it start
   * again) stops the watcher for good, and nothing of them is made again.
   */
  #start(isFirst = false): void {
    const cannot = cannotWatch(this.root, this.#storeDirectory, isFirst);
    if (cannot !== undefined) {
      this.#stop(cannot);
      return;
    }
    const generation = ++this.#generation;
    this.#state = 'starting';
    this.#pending = Buffer.alloc(0);
    this.#linked.clear();
    this.#ignoredSince.clear();
    this.#rules.clear();
    this.#unreadable = new Set();
    this.#excluded = new Set(ignoredDirectories(this.root, this.#outside, this.#unreadable));
    let child: ChildProcess;
    try {
      child = spawnInotifywait(this.root, this.#sentinels, this.#excluded);
    } catch {
      this.#stop('inotifywait could not be started');
      return;
    }
    this.#child = child;
    child.unref();
    (child.stdout as Socket | null)?.unref();
    child.stdout?.on('data', (chunk: Buffer) => {
      if (generation === this.#generation) this.#onOutput(chunk);
    });
    child.on('error', () => {
      if (generation === this.#generation) this.#stop('inotifywait is not installed');
    });
    child.on('exit', (code) => {
      if (generation !== this.#generation) return;
      if (this.#state !== 'starting') this.#lose('inotifywait exited');
      else if (code === 127) this.#stop('inotifywait is not installed');
      else {
        const lines = this.#pending.toString('utf8').trim().split('\n');
        // Out of inotify watches (fs.inotify.max_user_watches): trying again would not help.
        if (lines.some((line) => line.includes('upper limit'))) this.#stop(watchLimitMessage());
        else
          this.#failedStart(
            `inotifywait could not watch it (${lines.at(-1) ?? `exit code ${code}`})`,
          );
      }
    });
  }

  /**
   * A start that failed: a directory removed while the watches were set up makes inotifywait
   * give up, and one made meanwhile may be left unwatched; the workspace is busy, so the watcher
   * tries again later (see {@link RestartPacer}).
   */
  #failedStart(why: string): void {
    this.#kill();
    this.#restart(why);
  }

  /**
   * Starts again, at once or after the wait {@link RestartPacer} says; while it waits, drains
   * answer undefined (snapshots ask find). Says once when it keeps failing.
   */
  #restart(why: string, isFailure = true): void {
    const delay = isFailure ? this.#pacer.next() : 0;
    if (isFailure && this.#pacer.isToBeTold) {
      this.#isToldFailing = true;
      this.#onStopped?.(`inotifywait failed ${TOLD_AFTER} times in a row; last: ${why}`, true);
    }
    if (delay === 0) {
      this.#start();
      return;
    }
    const generation = ++this.#generation;
    this.#state = 'starting';
    setTimeout(() => generation === this.#generation && this.#start(), delay).unref();
  }

  /**
   * Once inotifywait has set its watches up: lists the directories and the files with several
   * links, waits for inotifywait to have handled every event until then (the watches of
   * directories made meanwhile), and checks that every directory has a watch. Then live.
   */
  async #check(generation: number): Promise<void> {
    const listing = await listForWatch(this.root, [...this.#excluded]);
    if (generation !== this.#generation) return;
    if (listing === undefined) {
      this.#failedStart('the workspace could not be listed');
      return;
    }
    if (!(await this.#barrier(() => {})) || generation !== this.#generation) return;
    const watched = watchedInodes(this.pid ?? -1);
    if (watched === undefined) {
      this.#stop('the watches of inotifywait could not be read');
      return;
    }
    const missed = firstUnwatchedListed(this.root, listing, watched);
    if (missed !== undefined) {
      this.#failedStart(`a directory was left without a watch (${missed})`);
      return;
    }
    for (const path of listing.linked) this.#linked.set(path, ctimeIn(this.root, path) ?? -1n);
    this.#pacer.live();
    this.#state = 'live';
    if (this.#isToldFailing) {
      this.#isToldFailing = false;
      this.#onResumed?.();
    }
    this.#onLive?.();
  }

  #onOutput(chunk: Buffer): void {
    const generation = this.#generation;
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    if (this.#state === 'starting') {
      const at = this.#pending.indexOf(ESTABLISHED);
      if (at === -1) return;
      this.#pending = this.#pending.subarray(at + ESTABLISHED.length);
      this.#state = 'checking';
      void this.#check(generation);
    }
    let start = 0;
    for (;;) {
      const end = this.#pending.indexOf(0, start);
      if (end === -1) break;
      this.#onRecord(this.#pending.subarray(start, end));
      if (generation !== this.#generation) return; // lost, and started again
      start = end + 1;
    }
    this.#pending = this.#pending.subarray(start);
    if (this.#pending.length > LONGEST_RECORD) this.#lose('it printed something it should not');
  }

  /** One event: `EVENTS PATH`, the path as inotifywait knows it. */
  #onRecord(record: Buffer): void {
    const head = /^([A-Z_,]+) /.exec(record.subarray(0, 80).toString('latin1'));
    if (head === null || record.length > LONGEST_RECORD) {
      this.#lose('it printed something it should not');
      return;
    }
    const events = (head[1] as string).split(',');
    const path = record.subarray(head[0].length);
    if (events.includes('Q_OVERFLOW') || events.includes('UNMOUNT')) {
      this.#lose('its queue overflowed, or a filesystem was unmounted');
      return;
    }
    // A directory moved: inotifywait renames the paths of the watches under it as it walks its
    // tree of them, which it changes as it goes (some are missed), and not at all when it moved
    // out or in from outside. Its later paths cannot be trusted: the watch starts again.
    if (events.includes('MOVED_FROM') && events.includes('ISDIR')) {
      this.#lose('a directory moved');
      return;
    }
    const sentinels = this.#sentinelsBytes;
    if (path.subarray(0, sentinels.length).equals(sentinels)) {
      const name = path.subarray(sentinels.length).toString('utf8');
      if (name === '') {
        if (events.includes('DELETE_SELF') || events.includes('MOVE_SELF')) {
          this.#lose('its sentinel directory went');
        }
      } else if (events.includes('CREATE') && name === this.#waiter?.name) {
        const waiter = this.#waiter;
        this.#waiter = undefined;
        waiter.arrived(true);
      }
      return;
    }
    const root = this.#rootBytes;
    if (
      !path.subarray(0, root.length).equals(root) ||
      (path.length > root.length && path[root.length] !== 0x2f)
    ) {
      this.#lose(`it reported a path outside the workspace`);
      return;
    }
    let relative = decodeName(path.subarray(root.length + 1));
    if (relative.endsWith('/')) relative = relative.slice(0, -1);
    if (relative === '' && (events.includes('DELETE_SELF') || events.includes('MOVE_SELF'))) {
      this.#lose('the workspace itself was moved or deleted');
      return;
    }
    if (isLeftOut(relative)) return;
    // An ignore file made, written, removed or moved: the rules kept may be out of date.
    if (isIgnoreFile(relative)) this.#rules.clear();
    const isDirectory = events.includes('ISDIR');
    if (this.#ignoredSince.holds(relative)) {
      // Dropped, but for the removal of one of them itself: a file may take its name.
      if (!(isDirectory && events.includes('DELETE') && this.#ignoredSince.delete(relative)))
        return;
    } else if (isDirectory && events.includes('ATTRIB') && this.#isEnteredOtherwise(relative)) {
      this.#lose('a directory became readable or unreadable', false);
      return;
    } else if (isDirectory && (events.includes('CREATE') || events.includes('MOVED_TO'))) {
      // One the ignore rules leave out: dropped, and the watch starts again without it.
      if (this.#rules.isIgnoredDirectory(relative)) {
        this.#ignoredSince.add(relative);
        this.#changed.add(parentOf(relative));
        return;
      }
      this.#made.add(relative);
    }
    this.#changed.add(relative);
    const isMovedIn = events.length === 1 && events[0] === 'MOVED_TO';
    if (!isMovedIn) this.#touched.add(relative);
    // Only a name made, removed or moved changes what its directory lists (a write does not). A
    // file moved in alone (a restore's, an editor's save) is found by its own path: the snapshot
    // looks at a changed name its directory did not hold (see rebuildDirectory).
    if (relative !== '' && !isMovedIn && events.some((event) => RENAMING_EVENTS.has(event))) {
      this.#changed.add(parentOf(relative));
    }
  }

  /**
   * Whether the directory at `relative`, whose mode or owner changed, can be entered now when it
   * could not at the start, or the other way round: what the watch leaves out is listed again.
   */
  #isEnteredOtherwise(relative: string): boolean {
    if (relative === '') return false;
    const wasUnreadable = this.#unreadable.has(relative);
    if (this.#excluded.has(relative) && !wasUnreadable) return false;
    return wasUnreadable === canEnter(join(this.root, relative));
  }

  #resetDrain(isLive: boolean): void {
    this.#changed = new Set();
    this.#made = new Set();
    this.#touched = new Set();
    this.#written = new Map();
    this.#wasLiveAtDrain = isLive;
  }

  /** Something may have gone unseen: the next drain answers undefined, and the watch starts again. */
  #lose(why: string, isFailure = true): void {
    if (this.#state === 'stopped') return;
    this.#wasLiveAtDrain = false;
    this.#kill();
    this.#restart(why, isFailure);
  }

  #stop(why: string, isToBeTold = true): void {
    if (this.#state === 'stopped' && this.stoppedBecause !== undefined) return;
    this.stoppedBecause = why;
    this.#state = 'stopped';
    this.#ignoredSince.clear();
    this.#generation++;
    this.#kill();
    if (isToBeTold) this.#onStopped?.(why, false);
  }

  /** Ends inotifywait; a drain waiting for its sentinel is answered at once. */
  #kill(): void {
    this.#child?.kill('SIGKILL');
    this.#child = undefined;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.arrived(false);
  }
}
