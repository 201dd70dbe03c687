// A separate process that uses the built lock: `node lock-child.mjs MODE LOCK [ARGS]`.
//   hold LOCK            take the lock, print "acquired", hold it until killed
//   count LOCK FILE N    N times: take the lock, read-increment-write FILE slowly, release
//   once LOCK LOG MS AT  at time AT (epoch ms), take the lock, hold it MS ms, append "start end"
//                        to LOG, release; AT lines up racing processes
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { acquireLock } from '../../dist/lib/index.js';

const [mode, lockPath, ...rest] = process.argv.slice(2);
const now = () => performance.timeOrigin + performance.now();

if (mode === 'hold') {
  await acquireLock(lockPath, { purpose: 'holding for a test' });
  process.stdout.write('acquired\n');
  setInterval(() => {}, 1000);
} else if (mode === 'count') {
  const [file, times] = rest;
  for (let index = 0; index < Number(times); index++) {
    const lock = await acquireLock(lockPath, { timeoutMs: 60_000 });
    const value = Number(readFileSync(file, 'utf8'));
    await sleep(1);
    writeFileSync(file, String(value + 1));
    await lock.release();
  }
} else if (mode === 'once') {
  const [log, holdMs, startAt] = rest;
  await sleep(Math.max(0, Number(startAt) - Date.now()));
  const lock = await acquireLock(lockPath, { timeoutMs: 60_000 });
  const start = now();
  await sleep(Number(holdMs));
  const end = now();
  await lock.release();
  appendFileSync(log, `${start} ${end}\n`);
}
