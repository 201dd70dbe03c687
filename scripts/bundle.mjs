// Bundles the `rewind` command's three entry points (the CLI, the MCP server and the web UI's
// server), after `tsc` has built dist/, into one file each under dist/bundle/; and the web UI's
// page (ui/) with its libraries (preact, htm, diff2html) into dist/ui-assets/, so that nothing
// is fetched from elsewhere at run time and the user has nothing to build. Node loads a module file by file: the CLI
// was ~240 modules (zod ~95 of them) and spent ~120 ms loading them before doing anything. One
// file, without the parts of zod it does not use, compiled with V8's code cache by bin/rewind.cjs,
// loads in about a tenth of that (docs/performance.md). The library (`rewind-agent` and its
// adapters) stays unbundled: its importers bundle it their own way.
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const path = (relative) => fileURLToPath(new URL(`../${relative}`, import.meta.url));

/**
 * Node's modules that a bundle requires as it loads but few commands use, loaded on first use
 * instead: commander requires node:child_process at its top (and it loads dgram and more), though
 * only a command that runs a program needs it (~0.7 ms of every command, ~2.5 ms when stdout is a
 * file). Each becomes a module of functions that ask Node for the real one when called
 * (`process.getBuiltinModule`); only its functions are offered (not its classes: `instanceof`
 * would not hold), so an import of anything else fails the build.
 */
const LAZY_BUILTINS = ['child_process'];
const lazyBuiltins = {
  name: 'lazy-builtins',
  setup(build) {
    const filter = new RegExp(`^(node:)?(${LAZY_BUILTINS.join('|')})$`);
    build.onResolve({ filter }, (args) => ({
      path: `node:${args.path.replace(/^node:/, '')}`,
      namespace: 'lazy-builtin',
    }));
    build.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, async (args) => {
      const real = await import(args.path);
      const names = Object.keys(real).filter(
        (name) => /^[a-z]/.test(name) && typeof real[name] === 'function',
      );
      const load = `process.getBuiltinModule(${JSON.stringify(args.path)})`;
      return {
        contents: names
          .map((name) => `export function ${name}(...args) { return ${load}.${name}(...args); }`)
          .join('\n'),
        loader: 'js',
      };
    });
  },
};

const { warnings } = await build({
  entryPoints: {
    cli: path('dist/cli/main.js'),
    mcp: path('dist/mcp/main.js'),
    ui: path('dist/ui/main.js'),
  },
  outdir: path('dist/bundle'),
  bundle: true,
  platform: 'node',
  // CommonJS, so that bin/rewind.cjs can compile it with V8's code cache (vm.Script).
  format: 'cjs',
  outExtension: { '.js': '.cjs' },
  // `import()` becomes `require`: a script compiled by vm.Script has no module loader to ask.
  supported: { 'dynamic-import': false },
  // Loaded only when a bucket or a database is named (src/store/s3-objects.ts,
  // src/ledger/postgres.ts): kept out of the bundle, required from node_modules then, so that
  // every other command does not parse them (the AWS SDK is 1 MB).
  external: ['@aws-sdk/client-s3', 'pg'],
  plugins: [lazyBuiltins],
  target: 'node20',
  // Only ASCII (esbuild's default, named here because bin/rewind.cjs relies on it: it reads the
  // bundle as latin1, which makes its string faster than decoding UTF-8).
  charset: 'ascii',
  // Smaller text parses faster; names stay, so stack traces (`--debug`) still read.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
});
// Each bundle's SHA-256 beside it: bin/rewind.cjs names the bundle's code cache by it, without
// loading node:crypto and hashing the bundle on every command.
for (const name of ['cli', 'mcp', 'ui']) {
  const file = path(`dist/bundle/${name}.cjs`);
  const bytes = readFileSync(file);
  if (bytes.some((byte) => byte > 0x7f)) {
    console.error(`scripts/bundle.mjs: ${file} is not ASCII, which bin/rewind.cjs relies on.`);
    process.exit(1);
  }
  writeFileSync(`${file}.sha256`, `${createHash('sha256').update(bytes).digest('hex')}\n`);
}
const page = await build({
  entryPoints: { app: path('ui/app.js') },
  outdir: path('dist/ui-assets'),
  bundle: true,
  platform: 'browser',
  format: 'esm',
  target: 'es2022',
  minify: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
warnings.push(...page.warnings);
mkdirSync(path('dist/ui-assets'), { recursive: true });
copyFileSync(path('ui/index.html'), path('dist/ui-assets/index.html'));
writeFileSync(
  path('dist/ui-assets/app.css'),
  `${readFileSync(path('ui/app.css'), 'utf8')}\n${readFileSync(path('node_modules/diff2html/bundles/css/diff2html.min.css'), 'utf8')}`,
);
// A warning here (`import.meta` in a CommonJS bundle, a require that cannot be resolved) is code
// that would misbehave only when the command runs: the build fails instead.
if (warnings.length > 0) {
  console.error(`scripts/bundle.mjs: ${warnings.length} warning(s) above; fix them.`);
  process.exit(1);
}
