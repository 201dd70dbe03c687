import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/processes.js';

/** The package a bare module specifier names (`@scope/name/sub` is `@scope/name`). */
const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

describe('the declarations it ships (dist/**/*.d.ts, built by the global setup)', () => {
  it('name only packages a user has with their types: its dependencies and peers that ship their own', async () => {
    const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const installed = new Set([
      ...Object.keys(manifest.dependencies ?? {}),
      ...Object.keys(manifest.peerDependencies ?? {}),
    ]);
    const named = new Set<string>();
    const dist = join(ROOT, 'dist');
    for (const entry of await readdir(dist, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.d.ts')) continue;
      const text = await readFile(join(entry.parentPath, entry.name), 'utf8');
      for (const match of text.matchAll(/(?:from |import\()'([^'.][^']*)'/g)) {
        const specifier = match[1] as string;
        if (!specifier.startsWith('node:')) named.add(packageOf(specifier));
      }
    }
    expect(named.size).toBeGreaterThan(0);
    const untyped: string[] = [];
    for (const name of named) {
      if (!installed.has(name)) {
        untyped.push(`${name} (not a dependency)`);
        continue;
      }
      // A package that ships no types (its types are a separate @types package, a
      // devDependency here) breaks a user's build under skipLibCheck: false.
      const own = await readFile(join(ROOT, 'node_modules', name, 'package.json'), 'utf8');
      if (!/"(types|typings)"\s*:/.test(own)) untyped.push(`${name} (ships no types)`);
    }
    expect(untyped).toEqual([]);
  });
});
