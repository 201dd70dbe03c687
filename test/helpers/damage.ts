import { chmod, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Damages a packed object in the store of `workspace`: one byte of it in its pack is changed, so
 * it no longer hashes to its name (`OBJECT_CORRUPT` when read). Throws when no pack holds it.
 */
export async function damagePackedObject(workspace: string, digest: string): Promise<void> {
  const packs = join(workspace, '.rewind', 'objects', 'pack');
  const key = Buffer.from(digest.slice('sha256:'.length), 'hex');
  for (const name of await readdir(packs)) {
    if (!name.endsWith('.idx')) continue;
    // An index (SPEC.md): a 12-byte header, then 56-byte records (digest, offset, stored size,
    // size).
    const index = await readFile(join(packs, name));
    for (let at = 12; at + 56 <= index.length; at += 56) {
      if (!index.subarray(at, at + 32).equals(key)) continue;
      const pack = join(packs, name.replace(/\.idx$/, '.pack'));
      await chmod(pack, 0o644);
      const bytes = await readFile(pack);
      const offset = Number(index.readBigUInt64BE(at + 32));
      bytes[offset] = (bytes[offset] as number) ^ 0xff;
      await writeFile(pack, bytes);
      return;
    }
  }
  throw new Error(`${digest} is in no pack of ${workspace}`);
}
