// The verifier: prints the verdict Rewind reads ({"status": "pass" | "fail", "errors": [...]}).
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('./src/math.js', import.meta.url), 'utf8');
const errors = [];
try {
  const math = await import(`data:text/javascript,${encodeURIComponent(source)}`);
  if (math.add(2, 3) !== 5) errors.push('add(2, 3) is not 5');
  const times = math.times ?? math.mul;
  if (typeof times !== 'function') errors.push('there is no times (or mul)');
  else if (times(2, 3) !== 6) errors.push(`times(2, 3) is ${times(2, 3)}, not 6`);
} catch (error) {
  errors.push(`src/math.js does not load: ${error.message}`);
}
console.log(JSON.stringify(errors.length === 0 ? { status: 'pass' } : { status: 'fail', errors }));
