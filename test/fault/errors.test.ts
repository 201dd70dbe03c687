import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readState, sameState } from '../helpers/state.js';
import { checkAfterFault, copyOf, makeTemplate, whichState } from './checks.js';
import { inPool, lastPoints, pointsToTry, problemWithFailure, runCli } from './harness.js';
import { realisticWorkspace, SCENARIOS } from './scenarios.js';

// A call that changes the disk or syncs it fails, for every operation: with ENOSPC from there on
// (a disk that stays full), or once with EIO or EACCES (and the other way round), in turn. The
// command must fail plainly (one `rewind:` message naming the cause and an error code, no stack
// trace) or succeed whole; the workspace must be as before or as after, never half-applied
// (unless the disk stays full and the message says the workspace is partly restored); then,
// the fault gone, the next command and every invariant of checks.ts. By default a spread of
// calls and the last four (EIO once); REWIND_FAULT_POINTS=all tries every one.

const FAULTS = [
  { code: 'ENOSPC', isPersistent: true, cause: /no space|full|ENOSPC/i },
  { code: 'EIO', isPersistent: false, cause: /i\/o|EIO/i },
  { code: 'EACCES', isPersistent: false, cause: /permission|EACCES/i },
  { code: 'EIO', isPersistent: true, cause: /i\/o|EIO/i },
  { code: 'ENOSPC', isPersistent: false, cause: /no space|full|ENOSPC/i },
  { code: 'EACCES', isPersistent: true, cause: /permission|EACCES/i },
] as const;

describe('a write that fails (ENOSPC, EIO, EACCES) at any call', () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario.name}: fails plainly with nothing half-applied, and the next command is clean`, async () => {
      const template = await makeTemplate(scenario, await realisticWorkspace());
      expect(template.reference.code, template.reference.stderr).toBe(0);
      const points = [
        ...pointsToTry(template.allCalls, scenario.errorBudget).map((point, index) => ({
          point,
          fault: FAULTS[index % FAULTS.length] as (typeof FAULTS)[number],
        })),
        // The last calls journal the operation's end: each also fails once, then the disk is fine.
        ...lastPoints(template.allCalls).map((point) => ({ point, fault: FAULTS[1] })),
      ];
      const isChanging = !sameState(template.before, template.after);
      const found = await inPool(points, async ({ point, fault }) => {
        const spec = `error:${fault.code}:${point}${fault.isPersistent ? '+' : ''}`;
        const workspace = await copyOf(template);
        const run = await runCli(workspace, template.prepared.argv, {
          fault: spec,
          faultLog: join(workspace, '..', 'fault.log'),
        });
        const problems: string[] = [];
        const which = whichState(template, await readState(workspace));
        if (run.code === 0) {
          if (which === 'other' || (which === 'before' && isChanging)) {
            problems.push(`it succeeded, but the workspace is ${which}`);
          }
        } else {
          const wording = problemWithFailure(run);
          if (wording) problems.push(wording);
          else if (!fault.cause.test(run.stderr)) {
            problems.push(`the message does not name the cause:\n${run.stderr.trim()}`);
          }
          const isSaidPartial = /partly restored/.test(run.stderr);
          if (which === 'other' && !(fault.isPersistent && isSaidPartial)) {
            problems.push('it failed and left the workspace half-applied');
          }
        }
        problems.push(
          ...(await checkAfterFault(template, workspace, {
            report: ['status'],
            isTornAllowed: true,
            isPartialAllowed: false,
          })),
        );
        const where = `${spec} of ${template.allCalls} (exit ${run.code})`;
        return problems.map((problem) => `${where}: ${problem}`);
      });
      console.log(`${scenario.name}: ${points.length} failing calls of ${template.allCalls}`);
      expect(found.flat()).toEqual([]);
    }, 600_000);
  }
});
