import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { REWIND_VERSION } from '../src/index.js';
import { ROOT } from './helpers/processes.js';

describe('version', () => {
  it('matches the version in package.json', async () => {
    const manifest = JSON.parse(await readFile(`${ROOT}package.json`, 'utf8')) as {
      version: string;
    };
    expect(REWIND_VERSION).toBe(manifest.version);
  });
});
