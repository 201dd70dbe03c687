// A writer on another machine, as far as the database can tell: appends COUNT entries to a
// session with the built ledger. Usage: node postgres-writer.mjs URL STORE SESSION COUNT NAME
import { PostgresLedger } from '../../dist/ledger/index.js';

const [url, store, session, count, name] = process.argv.slice(2);
const ledger = await PostgresLedger.open(url, store, session);
try {
  for (let index = 0; index < Number(count); index++) {
    await ledger.append('note-added', { text: `${name} ${index}` });
  }
} finally {
  await ledger.close();
}
