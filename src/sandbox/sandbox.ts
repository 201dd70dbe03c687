import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { RewindError } from '../errors.js';
import {
  type Command,
  cleanEnvironment,
  type RunOptions,
  type RunResult,
  runProcess,
} from './process.js';

/** Where commands run: `bwrap` (bubblewrap), `none` (a plain child process), or `auto`. */
export type SandboxBackend = 'bwrap' | 'none';

/** Options of {@link createSandbox}. */
export interface SandboxOptions {
  /** `auto` (default) picks `bwrap` when it works here, else `none` with a warning. */
  backend?: SandboxBackend | 'auto';
  /** The directory commands may write: the workspace (or the session's view of it). */
  workspace: string;
  /** Directories inside the workspace the command must not see (default `.rewind`). */
  hidden?: readonly string[];
  /** Let commands use the network (default: no network at all, loopback included). */
  network?: boolean;
  /** The bubblewrap program (default `bwrap` on the PATH). */
  bwrap?: string;
  /**
   * Absolute directories that contain the workspace yet must not be visible (the store holding
   * an isolated session's view): replaced by an empty read-only tmpfs before the workspace is
   * mounted into it.
   */
  masked?: readonly string[];
  /**
   * Where the workspace appears inside a `bwrap` sandbox, and where commands start (default: its
   * own path). An isolated session's view is mounted at the host workspace's path, so a command
   * that names the workspace by its absolute path finds the view there. Masked directories at or
   * under it need no mask: the mount covers them.
   */
  mountAt?: string;
  /**
   * The host's `.git` (a directory, or a linked worktree's `.git` file) when the workspace is an
   * isolated session's view, which has none. `bwrap` shows it read-only at the view's `.git`: git
   * sees the host's history and the view's files (`git status`, `diff`, `log` work; what writes to
   * the repository fails, read-only). Without bwrap, git run in the view finds no repository: it
   * would find the host's above the view, with the host's files as its work tree, so that `git
   * stash` or `git reset --hard` there would change the host.
   */
  hostGit?: string;
}

/** Runs commands, the same way whatever the backend. */
export interface Sandbox {
  readonly backend: SandboxBackend;
  /** What the caller should show: for `none` chosen by `auto`, what is not isolated. */
  readonly warnings: string[];
  /**
   * Runs a command in the workspace (a string runs through `/bin/sh -c`). Resolves with the same
   * shape on success and failure; rejects only when the sandbox itself cannot start
   * (`SANDBOX_UNAVAILABLE`).
   */
  run(command: Command, options?: Omit<RunOptions, 'cwd'> & { cwd?: string }): Promise<RunResult>;
}

/** The uid and gid a sandboxed command runs as: not root, inside its own user namespace. */
export const SANDBOX_UID = 1000;

/**
 * The bubblewrap argv for a command (pure, so it can be checked without running it): the whole
 * system read-only; only the workspace writable; the hidden directories replaced by an empty,
 * read-only tmpfs; a private `/tmp`, `/dev` and `/proc`; new user (uid and gid 1000), pid, ipc,
 * uts, cgroup and (unless `network`) network namespaces; every capability dropped; a new session
 * (no terminal injection); killed with its parent; a clean environment.
 */
export function bwrapArgs(input: {
  workspace: string;
  cwd: string;
  command: readonly string[];
  env: Record<string, string>;
  hidden: readonly string[];
  network: boolean;
  masked?: readonly string[];
  /** Where the workspace is mounted (default: its own path); see `SandboxOptions.mountAt`. */
  mountAt?: string;
  /** Shown read-only at the mounted workspace's `.git`, when it exists; see `SandboxOptions.hostGit`. */
  hostGit?: string;
}): string[] {
  const mountAt = input.mountAt ?? input.workspace;
  const masked = (input.masked ?? []).filter(
    (path) => path !== mountAt && !path.startsWith(`${mountAt}/`),
  );
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'];
  for (const path of masked) args.push('--tmpfs', path);
  args.push('--bind', input.workspace, mountAt);
  for (const path of masked) args.push('--remount-ro', path);
  for (const hidden of input.hidden) {
    const path = `${mountAt}/${hidden}`;
    args.push('--tmpfs', path, '--remount-ro', path);
  }
  if (input.hostGit !== undefined) args.push('--ro-bind-try', input.hostGit, `${mountAt}/.git`);
  args.push(
    '--unshare-user',
    '--uid',
    String(SANDBOX_UID),
    '--gid',
    String(SANDBOX_UID),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(input.network ? [] : ['--unshare-net']),
    '--hostname',
    'rewind-sandbox',
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--clearenv',
  );
  for (const [name, value] of Object.entries(input.env)) args.push('--setenv', name, value);
  args.push('--chdir', input.cwd, '--', ...input.command);
  return args;
}

/** The name `/etc/passwd` gives the sandbox's uid (the host's file is what the command sees). */
function sandboxUserName(): string | undefined {
  let passwd: string;
  try {
    passwd = readFileSync('/etc/passwd', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of passwd.split('\n')) {
    const [name, , uid] = line.split(':');
    if (uid === String(SANDBOX_UID) && name) return name;
  }
  return undefined;
}

/**
 * The environment of a sandboxed command: the clean one, but with what describes the host user
 * replaced by what holds inside, where the command runs as uid {@link SANDBOX_UID} with the
 * system read-only and a private, empty `/tmp`. `HOME` and `TMPDIR` are `/tmp` (the host's are
 * read-only in there, or absent: a `TMPDIR` under `/tmp`); `USER` and `LOGNAME` are the name
 * `/etc/passwd` gives that uid, or unset when it gives none. Then the caller's variables.
 */
export function sandboxEnvironment(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = { ...cleanEnvironment(), HOME: '/tmp', TMPDIR: '/tmp' };
  delete env.USER;
  delete env.LOGNAME;
  const name = sandboxUserName();
  if (name !== undefined) {
    env.USER = name;
    env.LOGNAME = name;
  }
  return { ...env, ...extra };
}

const probes = new Map<string, { works: boolean; reason: string }>();

/** A host user and group that bubblewrap is started as. */
export interface SandboxUser {
  uid: number;
  gid: number;
}

/** The group 65534 (`nogroup`): what a command runs with when the workspace's group is root's. */
const NO_GROUP = 65534;

/**
 * Who starts bubblewrap for a workspace. Its user namespace maps the sandbox's uid to whoever
 * starts it, so a command started by root would be root on the host (no capabilities, but the
 * owner of /root, /etc/shadow and SSH host keys, so able to read them). As root, it is therefore
 * started as the owner of the workspace, which stays writable; a workspace owned by root is
 * refused, with the reason. Any other user starts it as itself (`user` undefined).
 */
export function sandboxUserFor(workspace: string): { user?: SandboxUser; refusal?: string } {
  if (process.getuid?.() !== 0) return {};
  let owner: { uid: number; gid: number };
  try {
    owner = statSync(workspace);
  } catch (error) {
    return {
      refusal: `Rewind runs as root, so sandboxed commands run as the owner of the workspace, and ${workspace} cannot be read (${(error as Error).message})`,
    };
  }
  if (owner.uid === 0) {
    return {
      refusal:
        `Rewind runs as root and the workspace ${workspace} belongs to root, so a sandboxed command would be root on the host ` +
        '(able to read /root, /etc/shadow and SSH host keys). Run Rewind as a regular user, or give the workspace to one ' +
        '(chown -R USER: DIRECTORY): sandboxed commands then run as that user',
    };
  }
  return { user: { uid: owner.uid, gid: owner.gid === 0 ? NO_GROUP : owner.gid } };
}

/**
 * Whether bubblewrap can start a sandbox here (started as `user`, else as this process's user),
 * and if not, why and how to fix it. Probed once per process and user by running `true` in the
 * same namespaces a command gets.
 */
export function probeBwrap(
  program = 'bwrap',
  user?: SandboxUser,
): { works: boolean; reason: string } {
  const key = user ? `${program}\0${user.uid}:${user.gid}` : program;
  const known = probes.get(key);
  if (known) return known;
  let probed: { works: boolean; reason: string };
  if (process.platform !== 'linux') {
    probed = { works: false, reason: 'bubblewrap runs only on Linux' };
    probes.set(key, probed);
    return probed;
  }
  const result = spawnSync(
    program,
    bwrapArgs({
      workspace: '/tmp',
      cwd: '/',
      command: ['true'],
      env: {},
      hidden: [],
      network: false,
    }),
    // From `/`: this process's directory may be closed to `user`.
    { encoding: 'utf8', timeout: 10_000, cwd: '/', ...user },
  );
  if (result.error) {
    probed = {
      works: false,
      reason:
        (result.error as NodeJS.ErrnoException).code === 'ENOENT'
          ? 'bubblewrap is not installed (on Debian or Ubuntu: apt-get install bubblewrap)'
          : `bubblewrap could not be run: ${result.error.message}`,
    };
  } else if (result.status !== 0) {
    const said = result.stderr.trim();
    probed = {
      works: false,
      reason: /namespace|Operation not permitted|setting up uid map/i.test(said)
        ? `bubblewrap cannot create user namespaces here (${said}); enable them (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 24.04)`
        : `bubblewrap failed to start a sandbox: ${said || `exit ${result.status}`}`,
    };
  } else {
    probed = { works: true, reason: '' };
  }
  probes.set(key, probed);
  return probed;
}

/**
 * Why `user` cannot work in the workspace through the sandbox (every directory down to it must
 * let that user through, and the workspace must be writable by it), or undefined when it can.
 * Checked by running `test -w .` in the sandbox exactly as a command would run.
 */
function workspaceRefusal(
  program: string,
  user: SandboxUser,
  workspace: string,
  masked: readonly string[],
): string | undefined {
  const result = spawnSync(
    program,
    bwrapArgs({
      workspace,
      cwd: workspace,
      command: ['/bin/sh', '-c', 'test -w .'],
      env: {},
      hidden: [],
      network: false,
      masked,
    }),
    { encoding: 'utf8', timeout: 10_000, cwd: '/', ...user },
  );
  if (result.status === 0) return undefined;
  const said = (result.stderr ?? '').trim();
  const cannot = said.startsWith('bwrap:')
    ? `reach the workspace ${workspace} (${said})`
    : `write in ${workspace}`;
  return `Rewind runs as root, so sandboxed commands run as the workspace's owner (uid ${user.uid}), who cannot ${cannot}. Give the workspace and the directories above it to that user (or let it through them), or run Rewind as that user`;
}

/**
 * Whether bubblewrap can run commands for this workspace, and as whom: the reason it cannot,
 * else the user to start it as (as root: the workspace's owner, see {@link sandboxUserFor}).
 */
function chooseBwrap(options: SandboxOptions): { user?: SandboxUser; reason?: string } {
  const program = options.bwrap ?? 'bwrap';
  const probe = probeBwrap(program);
  if (!probe.works) return { reason: probe.reason };
  const chosen = sandboxUserFor(options.workspace);
  if (chosen.refusal !== undefined) return { reason: chosen.refusal };
  const user = chosen.user;
  if (!user) return {};
  const asUser = probeBwrap(program, user);
  if (!asUser.works) {
    return {
      reason: `Rewind runs as root, so sandboxed commands run as the workspace's owner (uid ${user.uid}), and ${asUser.reason}`,
    };
  }
  const refusal = workspaceRefusal(program, user, options.workspace, options.masked ?? []);
  return refusal === undefined ? { user } : { reason: refusal };
}

/**
 * A sandbox for a workspace. `bwrap` throws `SANDBOX_UNAVAILABLE` (saying why and how to fix it)
 * when bubblewrap cannot start here; `auto` then falls back to `none` with a warning. Run as
 * root, bubblewrap is started as the workspace's owner (a workspace owned by root is refused):
 * its user namespace would otherwise make the command's uid host root.
 */
export function createSandbox(options: SandboxOptions): Sandbox {
  const wanted = options.backend ?? 'auto';
  const warnings: string[] = [];
  let backend: SandboxBackend = wanted === 'none' ? 'none' : 'bwrap';
  let user: SandboxUser | undefined;
  if (backend === 'bwrap') {
    const chosen = chooseBwrap(options);
    user = chosen.user;
    if (chosen.reason !== undefined) {
      if (wanted === 'bwrap') {
        throw new RewindError(
          'SANDBOX_UNAVAILABLE',
          `The bwrap sandbox cannot start: ${chosen.reason}. Fix that, or choose --sandbox none (commands then run unisolated).`,
          { data: { backend: 'bwrap', reason: chosen.reason } },
        );
      }
      backend = 'none';
      user = undefined;
      warnings.push(
        `Commands run without a sandbox (${chosen.reason}): they can read and write whatever you can, outside the workspace too, and use the network.`,
      );
    }
  }
  const hidden = options.hidden ?? ['.rewind'];
  const network = options.network === true;
  return {
    backend,
    warnings,
    async run(command, runOptions = {}) {
      const cwd = runOptions.cwd ?? options.workspace;
      if (backend === 'none') {
        // Git stops looking for a repository at the view's root (see `hostGit`).
        const env = options.hostGit
          ? { ...runOptions.env, GIT_CEILING_DIRECTORIES: dirname(options.workspace) }
          : runOptions.env;
        return runProcess(command, { ...runOptions, cwd, ...(env && { env }) });
      }
      // Where `cwd` is inside, the workspace being mounted at `mountAt`.
      const mountAt = options.mountAt ?? options.workspace;
      const inside =
        cwd === options.workspace
          ? mountAt
          : cwd.startsWith(`${options.workspace}/`)
            ? `${mountAt}${cwd.slice(options.workspace.length)}`
            : cwd;
      const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : [...command];
      if (argv.length === 0 || argv[0] === '') {
        throw new RewindError(
          'INVALID_ARGUMENT',
          'The command is empty. Give the program to run and its arguments.',
        );
      }
      const env = sandboxEnvironment(runOptions.env);
      // Only what exists is hidden: bwrap would create a missing mount point on the host.
      const present = hidden.filter((path) => existsSync(`${options.workspace}/${path}`));
      const result = await runProcess(
        [
          options.bwrap ?? 'bwrap',
          ...bwrapArgs({
            workspace: options.workspace,
            cwd: inside,
            command: argv,
            env,
            hidden: present,
            network,
            ...(options.masked && { masked: options.masked }),
            ...(options.mountAt && { mountAt: options.mountAt }),
            ...(options.hostGit && { hostGit: options.hostGit }),
          }),
        ],
        { ...runOptions, cwd, env: {}, ...(user && { user }) },
      );
      // bwrap exits 1 with "bwrap: ..." when it cannot set the sandbox up: not the command's doing.
      if (result.exitCode === 1 && /^bwrap: /.test(result.stderr.toString('utf8'))) {
        throw new RewindError(
          'SANDBOX_UNAVAILABLE',
          `The bwrap sandbox could not start the command: ${result.stderr.toString('utf8').trim()}.`,
          { data: { backend: 'bwrap' } },
        );
      }
      return result;
    },
  };
}
