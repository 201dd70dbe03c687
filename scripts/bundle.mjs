// Bundles the `rewind` command's two entry points (the CLI and the MCP server), after `tsc` has
// built dist/, into one file each under dist/bundle/. Node loads a module file by file: the CLI
// was ~240 modules (zod ~95 of them) and spent ~120 ms loading them before doing anything. One
// file, without the parts of zod it does not use, compiled with V8's code cache by bin/rewind.js,
// loads in about a tenth of that (docs/performance.md). The library (`rewind-agent` and its
// adapters) stays unbundled: its importers bundle it their own way.
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const path = (relative) => fileURLToPath(new URL(`../${relative}`, import.meta.url));

const { warnings } = await build({
  entryPoints: {
    cli: path('dist/cli/main.js'),
    mcp: path('dist/mcp/main.js'),
  },
  outdir: path('dist/bundle'),
  bundle: true,
  platform: 'node',
  // CommonJS, so that bin/rewind.js can compile it with V8's code cache (vm.Script).
  format: 'cjs',
  outExtension: { '.js': '.cjs' },
  // `import()` becomes `require`: a script compiled by vm.Script has no module loader to ask.
  supported: { 'dynamic-import': false },
  target: 'node20',
  // Smaller text parses faster; names stay, so stack traces (`--debug`) still read.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
});
// A warning here (`import.meta` in a CommonJS bundle, a require that cannot be resolved) is code
// that would misbehave only when the command runs: the build fails instead.
if (warnings.length > 0) {
  console.error(`scripts/bundle.mjs: ${warnings.length} warning(s) above; fix them.`);
  process.exit(1);
}
