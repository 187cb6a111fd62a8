// The backends' connections: one command connection shared per connection setting, the
// blocking ones each backend keeps for itself, and the batching of the writes of one turn of
// the event loop.
import { Redis, type RedisOptions } from 'ioredis';

/** The connection a backend accepts: ioredis options, or an ioredis client it duplicates. */
export type TrafikeyConnection = RedisOptions | Redis;

/** The application's ioredis client, when it passed one (it is duplicated, never used). */
export function appClient(conn: TrafikeyConnection | undefined): Redis | undefined {
  return conn && typeof (conn as Redis).duplicate === 'function' ? (conn as Redis) : undefined;
}

function bullRetry(times: number): number {
  return Math.max(Math.min(Math.exp(times), 20000), 1000);
}

export function newClient(conn: TrafikeyConnection | undefined, blocking: boolean, connectionName?: string): Redis {
  const extra: RedisOptions = { maxRetriesPerRequest: blocking ? null : 20 };
  if (connectionName !== undefined) {
    extra.connectionName = connectionName;
  }
  const app = appClient(conn);
  if (app) {
    return app.duplicate(extra);
  }
  // BullMQ's own reconnect pace (1 s, growing to 20 s) unless the application set one: errors
  // while the server is away arrive as often as on BullMQ's own connections.
  return new Redis({ retryStrategy: bullRetry, ...(conn as RedisOptions | undefined), ...extra });
}

/**
 * Stands in for BullMQ's listener on a client the application passed. BullMQ uses that client
 * and listens for its errors; this package duplicates it, and the copy's errors reach the
 * classes' `error` events. Without a listener the application's own client, still trying to
 * connect, would print each failed try to the console.
 */
export const quiet = (): void => undefined;

/**
 * The command connections a process shares: one per connection setting (the same ioredis
 * client, or equal options), used by every backend whose own connection does not block. A
 * worker's waits (`CLAIM … BLOCK`) and QueueEvents' reads keep connections of their own; every
 * other command is bounded on the server, so one connection serves them all without holding
 * any back. The server then reads many commands at once instead of one per socket, and the
 * number of connections no longer grows with the number of queues and workers.
 */
const shared = new Map<unknown, { conn: Redis; users: number }>();

/** Options compared by value; functions in them (a retryStrategy) do not tell two apart. */
function settingOf(conn: TrafikeyConnection | undefined): unknown {
  return appClient(conn) ?? JSON.stringify(conn ?? {});
}

/** The shared command connection of this setting, one user more. */
export function acquire(conn: TrafikeyConnection | undefined): Redis {
  const setting = settingOf(conn);
  let entry = shared.get(setting);
  if (!entry || entry.conn.status === 'end') {
    entry = { conn: newClient(conn, false), users: 0 };
    // Each backend listens for the connection's events.
    entry.conn.setMaxListeners(0);
    shared.set(setting, entry);
  }
  entry.users += 1;
  return entry.conn;
}

/** One user fewer; true when it was the last, so the caller ends the connection. */
export function release(conn: Redis): boolean {
  for (const [setting, entry] of shared) {
    if (entry.conn === conn) {
      entry.users -= 1;
      if (entry.users > 0) {
        return false;
      }
      shared.delete(setting);
      return true;
    }
  }
  return true;
}

/** How long a closing connection's QUIT may wait behind a command still in flight. */
const QUIT_WAIT_MS = 1000;

/**
 * Ends a connection: QUIT, answered once the server has let the client go, so that a worker
 * closed is gone from CLIENT LIST (BullMQ's getWorkers) when close() resolves; dropped at once
 * when forced or not connected, or after QUIT_WAIT_MS when a command still holds it.
 */
export async function end(c: Redis, force: boolean): Promise<void> {
  if (!force && c.status === 'ready') {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>(ok => (timer = setTimeout(ok, QUIT_WAIT_MS)));
    await Promise.race([c.quit().catch(() => undefined), late]);
    clearTimeout(timer);
  }
  if (c.status !== 'end') {
    c.disconnect();
  }
}

/**
 * Resolves once `c` is ready to take commands, as BullMQ waits for its own connections: a client
 * made with `lazyConnect` is connected, one still connecting is waited for (the errors of its
 * failed tries are kept, not thrown), and one that ends first rejects with its last error. A
 * client with `enableOfflineQueue: false` refuses commands sent before it is ready, so the first
 * command must wait for this.
 */
export async function connected(c: Redis): Promise<void> {
  if (c.status === 'ready') {
    return;
  }
  if (c.status === 'wait') {
    await c.connect();
    return;
  }
  if (c.status === 'end') {
    throw new Error('Connection is closed.');
  }
  let last: Error | undefined;
  const onError = (err: Error) => {
    last = err;
  };
  let onReady = (): void => undefined;
  let onEnd = (): void => undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onReady = () => {
        resolve();
      };
      onEnd = () => {
        reject(last ?? new Error('Connection is closed.'));
      };
      c.once('ready', onReady);
      c.once('end', onEnd);
      c.on('error', onError);
    });
  } finally {
    c.off('ready', onReady);
    c.off('end', onEnd);
    c.off('error', onError);
  }
}

/** Jobs per write (bench.mjs, add from 50 Queues: 8, 16, 32 and one write a turn tried). */
const GATHER_MAX = 16;
/** The calls held by a corked socket, this one included. */
const corkedCalls = new WeakMap<object, number>();

/**
 * Adds, and workers' finish-and-fetch calls, made in one turn of the event loop leave
 * together: the first corks the socket; once the calls held carry more than `GATHER_MAX` jobs
 * (a call weighs the jobs it carries), the ones before the last go; the rest go once the
 * turn's other work is done. The server then reads the calls of many producers and workers
 * at once instead of one each, and it starts on the first ones while Node makes the others:
 * one write for the whole turn would have the two take turns instead. A full TRA.COMPLETESNEXT
 * therefore goes as soon as the next call is made. A call waits at most to the end of the turn.
 */
export function gather(conn: Redis, weight = 1): void {
  // ioredis types its socket as always there; it is absent until the first connect.
  const socket = conn.stream as Redis['stream'] | undefined;
  if (!socket || conn.status !== 'ready') return;
  if (socket.writableCorked === 0) {
    socket.cork();
    corkedCalls.set(socket, weight);
    process.nextTick(() => {
      socket.uncork();
    });
    return;
  }
  const n = (corkedCalls.get(socket) ?? 0) + weight;
  if (n > GATHER_MAX) {
    socket.uncork();
    socket.cork();
    corkedCalls.set(socket, weight);
  } else {
    corkedCalls.set(socket, n);
  }
}
