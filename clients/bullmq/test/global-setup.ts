// Starts two real servers for the package's tests, each on a free port bound to 127.0.0.1:
// one with the trafikey module (fence installed) and a plain one (no module), and stops both
// by their pid. TRAFIKEY_SO names the module (default: the repo's release build).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';

const repo = resolve(__dirname, '../../..');

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
    s.on('error', fail);
  });
}

async function start(args: string[]): Promise<{ port: number; proc: ChildProcess }> {
  const bin = execFileSync(join(repo, 'scripts/valkey-server-path'), { encoding: 'utf8' }).trim();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'trafikey-bullmq-'));
  const proc = spawn(bin, ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir, ...args], {
    stdio: 'ignore',
  });
  for (let i = 0; i < 100; i++) {
    const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => undefined);
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return { port, proc };
    } catch {
      c.disconnect();
      await new Promise(r => setTimeout(r, 100));
    }
  }
  proc.kill();
  throw new Error(`valkey-server did not start on port ${port}`);
}

export default async function setup({ provide }: { provide: (k: string, v: unknown) => void }) {
  const so = process.env.TRAFIKEY_SO ?? join(repo, 'target/release/libtrafikey.so');
  if (!existsSync(so)) {
    throw new Error(`no module at ${so}: run cargo build --release --lib (or set TRAFIKEY_SO)`);
  }
  const mod = await start(['--loadmodule', so]);
  const plain = await start([]);
  const c = new Redis({ host: '127.0.0.1', port: mod.port });
  await c.call('EMQ.INSTALL', 1, '{emq}:version');
  c.disconnect();
  provide('port', mod.port);
  provide('plainPort', plain.port);
  return () => {
    for (const p of [mod.proc, plain.proc]) {
      if (p.pid) {
        process.kill(p.pid, 'SIGTERM');
      }
    }
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    port: number;
    plainPort: number;
  }
}
