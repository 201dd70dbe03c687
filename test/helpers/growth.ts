import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'vitest';

setFlagsFromString('--expose-gc');
/** V8's collector, run before each measure so that no garbage of another one is paid for in it. */
const collect = runInNewContext('gc') as () => void;

/** The CPU time this process has used, in milliseconds: what other processes do adds none. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/**
 * Fails unless `work` costs about `factor` times more on an input `factor` times larger: the CPU
 * time of `work(build(size))` and `work(build(size * factor))`, measured in turns (`rounds` of
 * each, so that whatever slows the machine meanwhile slows both), median against median, must
 * grow less than `factor * slack`. Linear work grows `factor` times (a little more, here, as the
 * larger input outgrows the caches); quadratic work grows `factor * factor` times. The inputs are
 * built before anything is measured. Returns what the last call on the larger input returned.
 */
export function expectLinearGrowth<Input, Result>(
  name: string,
  build: (size: number) => Input,
  work: (input: Input) => Result,
  { size = 10_000, factor = 6, slack = 2, rounds = 3 } = {},
): Result {
  const small = build(size);
  const large = build(size * factor);
  const smallMs: number[] = [];
  const largeMs: number[] = [];
  let result: Result | undefined;
  for (let round = 0; round < rounds; round++) {
    collect();
    let started = cpuMs();
    work(small);
    smallMs.push(cpuMs() - started);
    collect();
    started = cpuMs();
    result = work(large);
    largeMs.push(cpuMs() - started);
  }
  const growth = median(largeMs) / Math.max(median(smallMs), 0.1);
  const times = (values: number[]) => values.map((value) => value.toFixed(1)).join(', ');
  expect(
    growth,
    `${name}: ${times(smallMs)} ms for ${size}, ${times(largeMs)} ms for ${size * factor}`,
  ).toBeLessThan(factor * slack);
  return result as Result;
}
