// A fault injector for the built CLI, loaded before it: `node --import ./inject.mjs bin/rewind.cjs`.
//
// It numbers, in program order, every call through `node:fs` (callback, sync and promise forms,
// and FileHandle methods) that changes what is on disk ("change" calls: opening for writing,
// write, rename, unlink, rm, mkdir, copy, link, symlink, chmod, utimes, truncate) or makes it
// durable ("sync" calls: fsync, fdatasync), and at one of them does what the environment says:
//
//   REWIND_FAULT=count                write the calls made to REWIND_FAULT_LOG at exit, one line each
//   REWIND_FAULT=kill:N               SIGKILL this process (and the process groups of the commands
//                                     it spawned: the machine went down) just before change call N
//   REWIND_FAULT=error:CODE:N         make call N (change or sync) fail with CODE (ENOSPC, EIO,
//                                     EACCES...) instead of running it
//   REWIND_FAULT=error:CODE:N+        the same, and every call after it: a disk that stays full
//   REWIND_FAULT=short                every write through a FileHandle writes half of what was
//                                     asked (at least a byte), as a disk nearly full can
//
// Numbering in JS call order rather than by syscall (strace counts per syscall and per thread, and
// libuv spreads one operation over its thread pool) makes a point name the same place in every
// run; run with UV_THREADPOOL_SIZE=1 so concurrent calls also complete in the same order.
// REWIND_FAULT_LOG, when set, also receives one line naming the call a fault was injected at.
import childProcess from 'node:child_process';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const spec = process.env.REWIND_FAULT ?? 'count';
const logPath = process.env.REWIND_FAULT_LOG;
const [mode, first = '', second = ''] = spec.split(':');
const killAt = mode === 'kill' ? Number(first) : 0;
const errorCode = mode === 'error' ? first : '';
const errorAt = mode === 'error' ? Number.parseInt(second, 10) : 0;
const isPersistent = mode === 'error' && second.endsWith('+');

const ERRNO = { ENOSPC: -28, EIO: -5, EACCES: -13, EROFS: -30, EDQUOT: -122 };
const calls = [];
let changes = 0;
let all = 0;
const spawned = new Set();

const real = {
  appendFileSync: fs.appendFileSync,
  writeSync: fs.writeSync,
  openSync: fs.openSync,
  closeSync: fs.closeSync,
};

function note(line) {
  if (!logPath) return;
  const fd = real.openSync(logPath, 'a');
  try {
    real.writeSync(fd, `${line}\n`);
  } finally {
    real.closeSync(fd);
  }
}

function describe(name, args) {
  const target = args.find((arg) => typeof arg === 'string' || arg instanceof URL);
  if (target !== undefined) return `${name} ${String(target)}`;
  if (typeof args[0] === 'number') return `${name} fd ${args[0]}`;
  return name;
}

function crash(where) {
  note(`killed before change ${changes}: ${where}`);
  for (const pid of spawned) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  process.kill(process.pid, 'SIGKILL');
}

/** The system call a Node.js error names for a call (`promises.writeFile` opens first: `open`). */
function syscallOf(name) {
  const bare = name.replace(/^(promises|handle)\./, '').replace(/Sync$/, '');
  const calls = {
    writeFile: 'open',
    appendFile: 'open',
    sync: 'fsync',
    datasync: 'fdatasync',
    utimes: 'utime',
    futimes: 'futime',
    lutimes: 'lutime',
    copyFile: 'copyfile',
    mkdtemp: 'mkdtemp',
  };
  return calls[bare] ?? bare;
}

function errorFor(name, args) {
  const path = args.find((arg) => typeof arg === 'string');
  const syscall = syscallOf(name);
  const message = {
    ENOSPC: 'no space left on device',
    EIO: 'i/o error',
    EACCES: 'permission denied',
    EROFS: 'read-only file system',
    EDQUOT: 'disk quota exceeded',
  }[errorCode];
  const error = new Error(
    `${errorCode}: ${message ?? 'injected fault'}, ${syscall}${path ? ` '${path}'` : ''}`,
  );
  error.errno = ERRNO[errorCode] ?? -5;
  error.code = errorCode;
  error.syscall = syscall;
  if (path) error.path = path;
  return error;
}

/** Counts a call; returns the error to fail it with, if any (a kill does not return). */
function account(kind, name, args) {
  all += 1;
  if (kind === 'change') changes += 1;
  const where = describe(name, args);
  if (mode === 'count') calls.push(`${kind} ${where}`);
  if (killAt > 0 && kind === 'change' && changes === killAt) crash(where);
  if (errorAt > 0 && (all === errorAt || (isPersistent && all > errorAt))) {
    if (all === errorAt) note(`${errorCode} at call ${all}: ${where}`);
    return errorFor(name, args);
  }
  return undefined;
}

const WRITE_FLAGS = /[wax+]/;
const { O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND } = fs.constants;
function opensForWriting(flags) {
  if (flags === undefined || flags === null) return false;
  if (typeof flags === 'number') {
    return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND)) !== 0;
  }
  return WRITE_FLAGS.test(String(flags));
}

/** The kind of a call by name, or undefined for a call that changes nothing. */
function kindOf(name, args, flagsIndex) {
  // Standard output and error: what the command prints changes nothing on disk.
  if ((name === 'write' || name === 'writev') && (args[0] === 1 || args[0] === 2)) return undefined;
  if (name === 'open') return opensForWriting(args[flagsIndex]) ? 'change' : undefined;
  if (name === 'fsync' || name === 'fdatasync' || name === 'sync' || name === 'datasync') {
    return 'sync';
  }
  return 'change';
}

const CHANGES = [
  'open',
  'write',
  'writev',
  'writeFile',
  'appendFile',
  'rename',
  'unlink',
  'rm',
  'rmdir',
  'mkdir',
  'mkdtemp',
  'copyFile',
  'cp',
  'symlink',
  'link',
  'chmod',
  'fchmod',
  'lchmod',
  'utimes',
  'futimes',
  'lutimes',
  'truncate',
  'ftruncate',
  'fsync',
  'fdatasync',
];

// A sync call made by another (writeFileSync opens and writes through fs.openSync and
// fs.writeSync) is part of that call, not one of its own.
let depth = 0;

function wrapSync(name, original) {
  return function injectedSync(...args) {
    const kind = depth === 0 ? kindOf(name, args, 1) : undefined;
    if (kind) {
      const error = account(kind, `${name}Sync`, args);
      if (error) throw error;
    }
    depth += 1;
    try {
      return original.apply(this, args);
    } finally {
      depth -= 1;
    }
  };
}

function wrapCallback(name, original) {
  return function injectedCallback(...args) {
    const kind = kindOf(name, args, 1);
    if (kind) {
      const error = account(kind, name, args);
      const callback = args.findLast((arg) => typeof arg === 'function');
      if (error && callback) {
        process.nextTick(callback, error);
        return undefined;
      }
    }
    return original.apply(this, args);
  };
}

function wrapPromise(name, original) {
  return function injectedPromise(...args) {
    const kind = kindOf(name, args, 1);
    if (kind) {
      const error = account(kind, `promises.${name}`, args);
      if (error) return Promise.reject(error);
    }
    return original.apply(this, args);
  };
}

for (const name of CHANGES) {
  if (typeof fs[name] === 'function') fs[name] = wrapCallback(name, fs[name]);
  const sync = `${name}Sync`;
  if (typeof fs[sync] === 'function') fs[sync] = wrapSync(name, fs[sync]);
  if (typeof fs.promises[name] === 'function') {
    fs.promises[name] = wrapPromise(name, fs.promises[name]);
  }
}

// FileHandle methods: the prototype of a handle, found by opening one.
const handle = await fs.promises.open('/dev/null', 'r');
const prototype = Object.getPrototypeOf(handle);
await handle.close();
for (const name of [
  'write',
  'writev',
  'writeFile',
  'appendFile',
  'truncate',
  'chmod',
  'utimes',
  'sync',
  'datasync',
]) {
  const original = prototype[name];
  if (typeof original !== 'function') continue;
  prototype[name] = function injectedHandle(...args) {
    const error = account(kindOf(name, args, -1), `handle.${name}`, [this.fd]);
    if (error) return Promise.reject(error);
    if (mode === 'short' && name === 'write' && ArrayBuffer.isView(args[0])) {
      const [bytes, offset = 0, length = bytes.byteLength - offset, position = null] = args;
      const part = Math.max(1, Math.floor(length / 2));
      return original.call(this, bytes, offset, Math.min(length, part), position);
    }
    return original.apply(this, args);
  };
}

// The commands a session runs are in process groups of their own: remember them, so a kill takes
// them down too, as a machine going down would.
const spawn = childProcess.spawn;
childProcess.spawn = function injectedSpawn(...args) {
  const child = spawn.apply(this, args);
  if (child.pid !== undefined) spawned.add(child.pid);
  child.once('exit', () => spawned.delete(child.pid));
  return child;
};

syncBuiltinESMExports();

if (mode === 'count' && logPath) {
  process.on('exit', () => {
    real.appendFileSync(logPath, `${calls.join('\n')}\n`);
  });
}
