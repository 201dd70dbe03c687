// A separate process appending to a session: `node ledger-child.mjs STORE SESSION WRITER COUNT`.
import { Ledger, sessionFileOf } from '../../dist/ledger/index.js';

const [storeDirectory, stem, writer, count] = process.argv.slice(2);
const ledger = await Ledger.open(sessionFileOf(storeDirectory, stem), { lockTimeoutMs: 60_000 });
for (let index = 0; index < Number(count); index++) {
  await ledger.append('note-added', {
    text: `${writer}:${index}`,
    padding: 'x'.repeat(index % 7 === 0 ? 3000 : 20),
  });
}
await ledger.close();
