// Creates shop.db: users(id, email, credits), 10 rows, as the first seed's example had it.
import { openDatabase } from './sqlite.mjs';

export const CREDITS = [40, 99, 100, 250, 499, 500, 800, 12, 365, 999];

/** The bytes of a freshly seeded shop.db. */
export async function seededDatabase() {
  const db = await openDatabase();
  db.run(
    'CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL, credits INTEGER NOT NULL)',
  );
  CREDITS.forEach((credits, index) => {
    db.run('INSERT INTO users (id, email, credits) VALUES (?, ?, ?)', [
      index + 1,
      `user${index + 1}@example.com`,
      credits,
    ]);
  });
  const bytes = Buffer.from(db.export());
  db.close();
  return bytes;
}
