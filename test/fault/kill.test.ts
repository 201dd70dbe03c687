import { describe, expect, it } from 'vitest';
import { checkAfterFault, copyOf, makeTemplate } from './checks.js';
import { inPool, pointsToTry, runCli } from './harness.js';
import { type Edit, EXEC_STEPS, execScript, realisticWorkspace, SCENARIOS } from './scenarios.js';

// A kill (SIGKILL, of Rewind and the commands it runs) just before each call that changes the
// disk, for every operation; then, in turn, nothing or an edit by a person, a command that only
// reads (which must name what is left pending), the next command, and every invariant (see
// checks.ts). By default a spread of points; REWIND_FAULT_POINTS=all tries every call,
// REWIND_FAULT_POINTS=N that many.

/** The commands that read without finishing anything: each must say what is pending. */
const REPORTS = [
  ['status'],
  ['log'],
  ['verify'],
  ['gc', '--grace-seconds', '0'],
  ['session', 'list'],
];

describe('a kill at any call that changes the disk', () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario.name}: the next command finishes or undoes it, and nothing is lost`, async () => {
      const template = await makeTemplate(scenario, await realisticWorkspace());
      expect(template.reference.code, template.reference.stderr).toBe(0);
      const points = pointsToTry(template.changeCalls, scenario.budget);
      const edits: (Edit | undefined)[] = [undefined, ...template.prepared.edits];
      const found = await inPool(points, async (point, index) => {
        const workspace = await copyOf(template);
        await runCli(workspace, template.prepared.argv, { fault: `kill:${point}` });
        const edit = edits[index % edits.length];
        const report = REPORTS[index % REPORTS.length] as string[];
        const problems = await checkAfterFault(template, workspace, {
          ...(edit && { edit }),
          report,
          isTornAllowed: true,
          isPartialAllowed: false,
        });
        const where =
          `kill before change ${point} of ${template.changeCalls}` +
          `${edit ? `, then ${edit.content === undefined ? 'removing' : 'an edit to'} ${edit.path}` : ''}` +
          `, then rewind ${report.join(' ')}`;
        return problems.map((problem) => `${where}: ${problem}`);
      });
      console.log(`${scenario.name}: ${points.length} kill points of ${template.changeCalls}`);
      expect(found.flat()).toEqual([]);
    }, 600_000);
  }

  it('exec: a crash midway through the command, after each of its steps', async () => {
    const scenario = SCENARIOS.find((candidate) => candidate.name === 'exec');
    if (!scenario) throw new Error('no exec scenario');
    const template = await makeTemplate(scenario, await realisticWorkspace());
    const steps = Array.from({ length: EXEC_STEPS.length + 1 }, (_, index) => index);
    const found = await inPool(steps, async (step) => {
      const workspace = await copyOf(template);
      await runCli(workspace, ['exec', '--', 'sh', '-c', execScript(step)]);
      const problems = await checkAfterFault(template, workspace, {
        report: ['status'],
        isTornAllowed: true,
        isPartialAllowed: true,
      });
      return problems.map((problem) => `crash after step ${step} of the command: ${problem}`);
    });
    expect(found.flat()).toEqual([]);
  }, 300_000);
});
