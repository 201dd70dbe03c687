// The verifier: checks the migration of shop.db against balances only it still knows, and
// prints one verdict line Rewind reads. Exit code 0 whatever the verdict.
//   node verify.mjs shop.db
import { existsSync } from 'node:fs';
import { queryFile } from './sqlite.mjs';

// Under 100 credits at $0.05, 100-499 at $0.10, 500 and above at $0.15.
const EXPECTED = [2.0, 4.95, 10.0, 25.0, 49.9, 75.0, 120.0, 0.6, 36.5, 149.85];

const path = process.argv[2] ?? 'shop.db';
try {
  if (!existsSync(path)) throw new Error(`${path} is missing`);
  const columns = (await queryFile(path, 'PRAGMA table_info(users)')).map((column) => column.name);
  const errors = [];
  if (!columns.includes('balance_usd')) errors.push('users has no balance_usd column');
  if (columns.includes('credits')) errors.push('users still has its credits column');
  if (columns.includes('balance_usd')) {
    const rows = await queryFile(path, 'SELECT id, balance_usd FROM users ORDER BY id');
    if (rows.length !== EXPECTED.length)
      errors.push(`users has ${rows.length} rows, not ${EXPECTED.length}`);
    for (const row of rows) {
      const expected = EXPECTED[row.id - 1];
      const actual = Math.round(Number(row.balance_usd) * 100) / 100;
      if (actual !== expected)
        errors.push(
          `user ${row.id}: balance ${actual.toFixed(2)}, expected ${expected.toFixed(2)}`,
        );
    }
  }
  console.log(
    JSON.stringify(
      errors.length === 0
        ? { status: 'pass', summary: `Migration verified: all ${EXPECTED.length} balances match` }
        : { status: 'fail', summary: `${errors.length} check(s) failed`, errors },
    ),
  );
} catch (error) {
  console.log(
    JSON.stringify({ status: 'unknown', notes: `the verifier crashed: ${error.message}` }),
  );
}
