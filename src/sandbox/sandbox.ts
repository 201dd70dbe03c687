import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
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
}): string[] {
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'];
  for (const path of input.masked ?? []) args.push('--tmpfs', path);
  args.push('--bind', input.workspace, input.workspace);
  for (const path of input.masked ?? []) args.push('--remount-ro', path);
  for (const hidden of input.hidden) {
    const path = `${input.workspace}/${hidden}`;
    args.push('--tmpfs', path, '--remount-ro', path);
  }
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

const probes = new Map<string, { works: boolean; reason: string }>();

/**
 * Whether bubblewrap can start a sandbox here, and if not, why and how to fix it. Probed once per
 * process by running `true` in the same namespaces a command gets.
 */
export function probeBwrap(program = 'bwrap'): { works: boolean; reason: string } {
  const known = probes.get(program);
  if (known) return known;
  let probed: { works: boolean; reason: string };
  if (process.platform !== 'linux') {
    probed = { works: false, reason: 'bubblewrap runs only on Linux' };
    probes.set(program, probed);
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
    { encoding: 'utf8', timeout: 10_000 },
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
  probes.set(program, probed);
  return probed;
}

/**
 * A sandbox for a workspace. `bwrap` throws `SANDBOX_UNAVAILABLE` (saying why and how to fix it)
 * when bubblewrap cannot start here; `auto` then falls back to `none` with a warning.
 */
export function createSandbox(options: SandboxOptions): Sandbox {
  const wanted = options.backend ?? 'auto';
  const warnings: string[] = [];
  let backend: SandboxBackend = wanted === 'none' ? 'none' : 'bwrap';
  if (backend === 'bwrap') {
    const probe = probeBwrap(options.bwrap);
    if (!probe.works) {
      if (wanted === 'bwrap') {
        throw new RewindError(
          'SANDBOX_UNAVAILABLE',
          `The bwrap sandbox cannot start: ${probe.reason}. Fix that, or choose --sandbox none (commands then run unisolated).`,
          { data: { backend: 'bwrap', reason: probe.reason } },
        );
      }
      backend = 'none';
      warnings.push(
        `Commands run without a sandbox (${probe.reason}): they can read and write whatever you can, outside the workspace too, and use the network.`,
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
      if (backend === 'none') return runProcess(command, { ...runOptions, cwd });
      const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : [...command];
      if (argv.length === 0 || argv[0] === '') {
        throw new RewindError(
          'INVALID_ARGUMENT',
          'The command is empty. Give the program to run and its arguments.',
        );
      }
      // The host's home is read-only in there: give tools a writable one unless the caller did.
      const env = { ...cleanEnvironment(), HOME: '/tmp', ...runOptions.env };
      // Only what exists is hidden: bwrap would create a missing mount point on the host.
      const present = hidden.filter((path) => existsSync(`${options.workspace}/${path}`));
      const result = await runProcess(
        [
          'bwrap',
          ...bwrapArgs({
            workspace: options.workspace,
            cwd,
            command: argv,
            env,
            hidden: present,
            network,
            ...(options.masked && { masked: options.masked }),
          }),
        ],
        { ...runOptions, cwd, env: {} },
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
