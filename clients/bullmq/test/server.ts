// Real servers for the package's tests: valkey-server (scripts/valkey-server-path) bound to
// 127.0.0.1 on a free port, stopped by its pid.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';

const repo = resolve(__dirname, '../../..');

/** The module the tests load: TRAFIKEY_SO, else the repo's release build. */
export function modulePath(): string {
  const so = process.env.TRAFIKEY_SO ?? join(repo, 'target/release/libtrafikey.so');
  if (!existsSync(so)) {
    throw new Error(`no module at ${so}: run cargo build --release --lib (or set TRAFIKEY_SO)`);
  }
  return so;
}

/** A free port on 127.0.0.1 (nothing listens on it once this resolves). */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
    s.on('error', fail);
  });
}

export interface Server {
  port: number;
  dir: string;
  proc: ChildProcess;
}

/**
 * Starts a server with `args` (after its own: no RDB saves, AOF off unless `args` say
 * otherwise) and waits until it answers. `at` restarts a stopped one: the same port and
 * directory, so it reloads what it persisted there.
 */
export async function startServer(args: string[], at?: { port: number; dir: string }): Promise<Server> {
  const bin = execFileSync(join(repo, 'scripts/valkey-server-path'), { encoding: 'utf8' }).trim();
  const port = at?.port ?? (await freePort());
  const dir = at?.dir ?? mkdtempSync(join(tmpdir(), 'trafikey-bullmq-'));
  const proc = spawn(
    bin,
    ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir, ...args],
    {
      stdio: 'ignore',
    },
  );
  for (let i = 0; i < 100; i++) {
    const c = new Redis({
      host: '127.0.0.1',
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    c.on('error', () => undefined);
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return { port, dir, proc };
    } catch {
      c.disconnect();
      await new Promise(r => setTimeout(r, 100));
    }
  }
  proc.kill();
  throw new Error(`valkey-server did not start on port ${port}`);
}

/** Stops a server by its pid (SIGTERM: it writes out its AOF) and waits for it to exit. */
export async function stopServer(s: Server): Promise<void> {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null || !s.proc.pid) {
    return;
  }
  const exited = new Promise(r => s.proc.once('exit', r));
  process.kill(s.proc.pid, 'SIGTERM');
  await exited;
}

/** Runs EMQ.INSTALL: the fence every trafikey command checks. */
export async function install(port: number, db = 0): Promise<void> {
  const c = new Redis({ host: '127.0.0.1', port, db });
  try {
    await c.call('EMQ.INSTALL', 1, '{emq}:version');
  } finally {
    c.disconnect();
  }
}
