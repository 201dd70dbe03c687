// SQLite without a native build: sql.js (SQLite compiled to WebAssembly) on a database file.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const initSqlJs = require('sql.js');
let loaded;

/** The database in `bytes` (a new one when absent), as sql.js opens it. */
export async function openDatabase(bytes) {
  loaded ??= initSqlJs();
  const SQL = await loaded;
  return new SQL.Database(bytes);
}

/** The rows `query` gives on the database file at `path`, as objects. */
export async function queryFile(path, query) {
  const db = await openDatabase(readFileSync(path));
  try {
    return rowsOf(db.exec(query));
  } finally {
    db.close();
  }
}

/** sql.js results as a list of row objects (of the last statement that returned rows). */
export function rowsOf(results) {
  const last = results.at(-1);
  if (!last) return [];
  return last.values.map((row) =>
    Object.fromEntries(last.columns.map((name, i) => [name, row[i]])),
  );
}
