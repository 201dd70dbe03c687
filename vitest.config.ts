import { defineConfig } from 'vitest/config';

// CI reads the test counts from a JSON report, since it does not parse vitest's own summary.
const report = process.env.REWIND_TEST_REPORT;

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // The fuzz tests try REWIND_FUZZ_RUNS times more inputs when asked: their time grows with it.
    testTimeout: 30_000 * Math.max(1, Number(process.env.REWIND_FUZZ_RUNS) || 1),
    hookTimeout: 30_000,
    reporters: report ? ['default', 'json'] : ['default'],
    ...(report && { outputFile: { json: report } }),
  },
});
