// BullMQ's suite on trafikey (or, with TRAFIKEY_MODE=reference, on BullMQ's own Redis
// backend): one file at a time, each test retried twice since the suite is timing-sensitive.
import { defineConfig } from 'vitest/config';

const reference = process.env.TRAFIKEY_MODE === 'reference';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    testTimeout: 10000,
    hookTimeout: 10000,
    retry: Number(process.env.TRAFIKEY_RETRY ?? 2),
    fileParallelism: false,
    sequence: { concurrent: false },
    setupFiles: ['./vitest.port.setup.ts', reference ? './vitest.setup.ts' : './vitest.trafikey.setup.ts'],
    runner: './trafikey-runner.ts',
    reporters: ['dot'],
    globals: false,
  },
});
