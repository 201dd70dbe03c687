import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, posix, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/processes.js';

/**
 * The layer rules of DESIGN.md, checked on the real imports of src/**\/*.ts:
 * - imports point downward only; modules of one layer do not import each other;
 * - `src/errors.ts` is the foundation every module may import;
 * - a module is imported only through its `index.ts`;
 * - edges (CLI, MCP, adapters, UI) import only `src/index.ts`, the public API, and
 *   `src/operations/index.ts`, the operation table;
 * - the operation table imports only `src/index.ts`, as an edge would;
 * - each third-party package is imported by exactly one module, named here.
 */
const LAYER_OF_MODULE: Record<string, number> = {
  errors: 0,
  lib: 0,
  store: 1,
  ledger: 2,
  workspace: 2,
  conversation: 2,
  sandbox: 2,
  verifier: 2,
  session: 3,
  index: 4,
  operations: 4,
  cli: 4,
  mcp: 4,
  ui: 4,
};
const EDGES = new Set(['cli', 'mcp', 'ui']);

/** What an edge may import, and what the operation table may (the public API only). */
const EDGE_IMPORTS = new Set(['index.ts', 'operations/index.ts']);
const OPERATIONS_IMPORTS = new Set(['index.ts']);

/** The one module allowed to import each third-party package. */
const PACKAGE_OWNERS: Record<string, string> = {
  '@modelcontextprotocol/node': 'mcp',
  '@modelcontextprotocol/server': 'mcp',
  zod: 'operations',
  ai: 'adapters/ai-sdk',
  '@langchain/core': 'adapters/langgraph',
  '@langchain/langgraph': 'adapters/langgraph',
  '@openai/agents': 'adapters/openai-agents',
  commander: 'cli',
  diff: 'workspace',
  ignore: 'workspace',
  hono: 'ui',
  '@aws-sdk/client-s3': 'store',
  pg: 'ledger',
  '@hono/node-server': 'ui',
};

type Sources = Record<string, string>;

function moduleOf(file: string): string {
  const parts = file.split('/');
  if (parts.length === 1) return (parts[0] ?? '').replace(/\.ts$/, '');
  if (parts[0] === 'adapters') return `adapters/${parts[1]}`;
  return parts[0] ?? '';
}

function layerOf(module: string): number | undefined {
  return module.startsWith('adapters/') ? 4 : LAYER_OF_MODULE[module];
}

function isEdge(module: string): boolean {
  return EDGES.has(module) || module.startsWith('adapters/');
}

function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

function importsOf(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((imported) => imported.fileName);
}

/**
 * What importing `source` loads: its static imports and re-exports, not `import type` (erased)
 * nor `import()` (loaded when called: the S3 client, say, only once a bucket is named).
 */
function loadedImportsOf(source: string): string[] {
  const file = ts.createSourceFile('source.ts', source, ts.ScriptTarget.Latest);
  const loaded: string[] = [];
  for (const statement of file.statements) {
    if (ts.isImportDeclaration(statement) && !statement.importClause?.isTypeOnly) {
      loaded.push((statement.moduleSpecifier as ts.StringLiteral).text);
    } else if (
      ts.isExportDeclaration(statement) &&
      statement.moduleSpecifier &&
      !statement.isTypeOnly
    ) {
      loaded.push((statement.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return loaded;
}

/** Every layer-rule violation in a set of sources keyed by path relative to src/. */
function findViolations(sources: Sources): string[] {
  const violations: string[] = [];
  for (const [file, source] of Object.entries(sources)) {
    const module = moduleOf(file);
    const layer = layerOf(module);
    if (layer === undefined) {
      violations.push(`${file}: not in any layer of DESIGN.md`);
      continue;
    }
    for (const specifier of importsOf(source)) {
      if (specifier.startsWith('node:') || builtinModules.includes(specifier)) continue;
      if (!specifier.startsWith('.')) {
        const name = packageName(specifier);
        const owner = PACKAGE_OWNERS[name];
        if (owner === undefined)
          violations.push(`${file}: imports ${name}, which has no owning module in this test`);
        else if (owner !== module)
          violations.push(`${file}: imports ${name}, which only ${owner} may import`);
        continue;
      }
      const target = posix
        .normalize(posix.join(posix.dirname(file), specifier))
        .replace(/\.js$/, '.ts');
      const targetModule = moduleOf(target);
      if (targetModule === module) continue;
      if (targetModule === 'errors') continue;
      const targetLayer = layerOf(targetModule);
      if (isEdge(module)) {
        if (!EDGE_IMPORTS.has(target))
          violations.push(
            `${file}: an edge may import only src/index.ts and src/operations/index.ts, not ${target}`,
          );
        continue;
      }
      if (module === 'operations') {
        if (!OPERATIONS_IMPORTS.has(target))
          violations.push(
            `${file}: the operation table may import only src/index.ts, not ${target}`,
          );
        continue;
      }
      if (targetLayer === undefined || targetLayer >= layer) {
        violations.push(`${file}: imports ${target} (layer ${targetLayer}) from layer ${layer}`);
      } else if (target !== `${targetModule}/index.ts`) {
        violations.push(`${file}: imports ${target} instead of ${targetModule}/index.ts`);
      }
    }
  }
  return violations;
}

/** Every package reachable through static imports from `entry`. */
function packagesReachableFrom(sources: Sources, entry: string): Set<string> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const pending = [entry];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    for (const specifier of loadedImportsOf(sources[file] ?? '')) {
      if (specifier.startsWith('.')) {
        pending.push(
          posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, '.ts'),
        );
      } else if (!specifier.startsWith('node:')) {
        packages.add(packageName(specifier));
      }
    }
  }
  return packages;
}

function readSources(directory: string): Sources {
  const sources: Sources = {};
  const walk = (current: string): void => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts'))
        sources[relative(directory, path)] = readFileSync(path, 'utf8');
    }
  };
  walk(directory);
  return sources;
}

describe('architecture', () => {
  const sources = readSources(join(ROOT, 'src'));

  it('has sources to check', () => {
    expect(Object.keys(sources)).toEqual(
      expect.arrayContaining(['index.ts', 'errors.ts', 'lib/index.ts', 'cli/main.ts']),
    );
  });

  it('keeps every import of src/ within the layer rules of DESIGN.md', () => {
    expect(findViolations(sources)).toEqual([]);
  });

  it('loads no framework, MCP or CLI package when a program imports the public API', () => {
    const allowed = new Set(['diff', 'ignore']);
    expect(
      [...packagesReachableFrom(sources, 'index.ts')].filter((name) => !allowed.has(name)),
    ).toEqual([]);
  });

  it('keeps every source file within 600 lines: one that must grow past it holds two concepts', () => {
    const long = Object.entries(sources)
      .map(([file, source]) => ({ file, lines: source.split('\n').length }))
      .filter(({ lines }) => lines > 600);
    expect(long).toEqual([]);
  });

  it('declares every third-party package it allows as a dependency', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    const declared = {
      ...manifest.dependencies,
      ...manifest.optionalDependencies,
      ...manifest.peerDependencies,
    };
    for (const name of Object.keys(PACKAGE_OWNERS)) expect(declared).toHaveProperty([name]);
  });

  describe('the checker itself', () => {
    it.each([
      [
        'an upward import',
        { 'store/objects.ts': "import { x } from '../session/index.js';" },
        'from layer 1',
      ],
      [
        'a sideways import',
        { 'ledger/a.ts': "import { x } from '../workspace/index.js';" },
        'from layer 2',
      ],
      [
        'a reach past an index',
        { 'session/a.ts': "import { x } from '../store/objects.js';" },
        'instead of store/index.ts',
      ],
      [
        'an edge reaching into a module',
        { 'cli/main.ts': "import { x } from '../session/index.js';" },
        'an edge may import only',
      ],
      [
        'a package in the wrong module',
        { 'store/a.ts': "import { Command } from 'commander';" },
        'only cli may import',
      ],
      [
        'an unowned package',
        { 'lib/a.ts': "import picocolors from 'picocolors';" },
        'no owning module',
      ],
      [
        'a dynamic upward import',
        { 'lib/a.ts': "const m = await import('../store/index.js');" },
        'from layer 0',
      ],
      ['a file outside every layer', { 'helpers/a.ts': '' }, 'not in any layer'],
      [
        'the operation table reaching into a module',
        { 'operations/files.ts': "import { x } from '../session/index.js';" },
        'the operation table may import only',
      ],
      [
        'the operation table importing an edge',
        { 'operations/files.ts': "import { x } from '../cli/main.js';" },
        'the operation table may import only',
      ],
      [
        'an edge reaching past the operation table index',
        { 'mcp/server.ts': "import { x } from '../operations/files.js';" },
        'an edge may import only',
      ],
      [
        'zod outside the operation table',
        { 'mcp/server.ts': "import { z } from 'zod';" },
        'only operations may import',
      ],
    ])('catches %s', (_name, files, message) => {
      expect(findViolations(files)).toEqual([expect.stringContaining(message)]);
    });

    it('accepts downward imports through an index, errors.ts from anywhere, node builtins, and edges built on the operation table', () => {
      expect(
        findViolations({
          'session/a.ts':
            "import { x } from '../store/index.js';\nimport { y } from '../lib/index.js';",
          'lib/a.ts':
            "import { RewindError } from '../errors.js';\nimport { open } from 'node:fs/promises';",
          'cli/main.ts':
            "import { init } from '../index.js';\nimport { Command } from 'commander';",
          'mcp/server.ts': "import { OPERATIONS } from '../operations/index.js';",
          'operations/files.ts':
            "import { z } from 'zod';\nimport { type Session } from '../index.js';",
          'index.ts': "export { init } from './session/index.js';",
        }),
      ).toEqual([]);
    });
  });
});
