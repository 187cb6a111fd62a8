// The README's example programs, run as a user runs them (`node examples/<name>.mjs` against the
// built package, `dist/`, which `npm test` builds first) on the test server: each must end
// with status 0 and print what the README says it prints. bull-board.mjs has its own file.
import { describe, expect, inject, it } from 'vitest';
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

const run = promisify(execFile);
const port = inject('port');

async function example(name: string, env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await run(process.execPath, [resolve(__dirname, `../examples/${name}.mjs`)], {
    env: { ...process.env, VALKEY_PORT: String(port), ...env },
    timeout: 60000,
  });
  return stdout;
}

/** The example's queue `mail` must be gone afterwards: it obliterates what it made. */
async function mailKeys(): Promise<string[]> {
  const admin = new Redis({ host: '127.0.0.1', port });
  try {
    return (await admin.keys('*mail*')).filter(k => k.startsWith('emq:{bull:mail}') || k.startsWith('bull:mail:'));
  } finally {
    admin.disconnect();
  }
}

describe('examples', () => {
  it('app.mjs: a job done, a job failed after its attempts, a custom id added once', async () => {
    const out = await example('app');
    expect(out).toContain("ok  -> { delivered: 'ada@example.org' }");
    expect(out).toContain('bad -> cannot deliver to bob@invalid');
    // ada's job and carol's (added twice, one job) completed; bob's failed.
    expect(out).toMatch(/counts \{ completed: 2, failed: 1, waiting: 0, active: 0 \}/);
    expect(await mailKeys()).toEqual([]);
  }, 60000);

  it("move.mjs: every waiting and delayed job of BullMQ's store moved onto trafikey", async () => {
    const out = await example('move', { WAITING: '2000' });
    expect(out).toMatch(/moved: 3000,/);
    expect(out).toMatch(/left: 0,/);
    expect(out).toContain('on trafikey: { wait: 2000, delayed: 1000 }');
    expect(await mailKeys()).toEqual([]);
  }, 60000);
});
