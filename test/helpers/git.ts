import { execFileSync } from 'node:child_process';

/** Runs git as a user would, but blind to this machine's global and system configuration. */
export function git(cwd: string, args: string[], input?: string): string {
  return execFileSync('git', ['-c', 'core.excludesFile=/dev/null', ...args], {
    cwd,
    encoding: 'utf8',
    input,
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
  });
}
