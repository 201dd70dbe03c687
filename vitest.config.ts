import { defineConfig } from 'vitest/config';

// CI reads the test counts from a JSON report, since it does not parse vitest's own summary.
const report = process.env.REWIND_TEST_REPORT;

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: report ? ['default', 'json'] : ['default'],
    ...(report && { outputFile: { json: report } }),
  },
});
