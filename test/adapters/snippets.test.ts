import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runNode } from '../helpers/processes.js';

/** The first `ts` code block under a heading of docs/adapters.md. */
async function snippetUnder(heading: string): Promise<string> {
  const page = await readFile(join(ROOT, 'docs', 'adapters.md'), 'utf8');
  const section = page.slice(page.indexOf(heading));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  if (!match?.[1]) throw new Error(`no ts snippet under ${heading}`);
  return match[1];
}

/** Type-checks `source` under strict, with `rewind-agent` resolved to this checkout's sources. */
async function typeCheck(source: string): Promise<{ code: number | null; stdout: string }> {
  // Inside the checkout, so that the frameworks resolve from its node_modules.
  const directory = await mkdtemp(join(ROOT, '.snippet-'));
  try {
    await writeFile(join(directory, 'snippet.ts'), source);
    await writeFile(
      join(directory, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'esnext',
          moduleResolution: 'bundler',
          target: 'es2022',
          lib: ['es2023', 'esnext.disposable', 'dom'],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
          paths: {
            'rewind-agent': [join(ROOT, 'src', 'index.ts')],
            'rewind-agent/*': [join(ROOT, 'src', 'adapters', '*', 'index.ts')],
          },
        },
        files: ['snippet.ts'],
      }),
    );
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    return await runNode([tsc, '-p', directory], { cwd: directory });
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

describe('docs/adapters.md', () => {
  it("type-checks the OpenAI Agents snippet under strict, and rewindTool infers execute's input from parameters", async () => {
    const snippet = await snippetUnder('## OpenAI Agents SDK');
    const source = `import type { Model } from '@openai/agents';
import { openSession } from 'rewind-agent';
import { z } from 'zod';
declare const workspace: string;
declare const model: Model;
const session = await openSession({ workspace });
const description = 'Writes a file';
const parameters = z.object({ path: z.string(), content: z.string() });
const execute = async ({ path, content }: { path: string; content: string }) => {
  await session.write(path, content);
  return \`wrote \${path}\`;
};
${snippet}
// execute's input is inferred from the zod parameters, as with the SDK's own tool().
export const inferred = rewindTool(session, {
  name: 'read_file',
  description,
  parameters: z.object({ path: z.string() }),
  execute: async ({ path }) => path.toUpperCase(),
});
`;
    const result = await typeCheck(source);
    expect(result.stdout).toBe('');
    expect(result.code).toBe(0);
  }, 120_000);
});
