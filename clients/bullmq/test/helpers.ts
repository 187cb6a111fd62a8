// What every package test file needs: waiting for a condition, closing what a test opened,
// and a queue of its own for each test.
import { afterEach, beforeEach } from 'vitest';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';

export const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/** Polls `check` every 20 ms until it holds; throws after `ms`. */
export async function until(check: () => Promise<boolean> | boolean, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) {
      throw new Error('condition not met in time');
    }
    await sleep(20);
  }
}

const closers: { close(): Promise<void> }[] = [];

/** Keeps `x` to be closed after the test (`closeTracked`), newest first. */
export function track<T extends { close(): Promise<void> }>(x: T): T {
  closers.push(x);
  return x;
}

export async function closeTracked(): Promise<void> {
  for (const c of closers.splice(0).reverse()) {
    await c.close().catch(() => undefined);
  }
}

/** A queue as `eachQueue` opens it: BullMQ's Queue, or any class with its calls. */
interface OwnQueue {
  waitUntilReady(): Promise<unknown>;
  obliterate(o: { force: boolean }): Promise<void>;
  close(): Promise<void>;
}

/**
 * Each test of the file gets a queue of its own (`<prefix>-<uuid>`, ready) and a plain
 * connection to read the module's keys, handed to `set`; after it the queue is obliterated,
 * everything tracked closed and the connection dropped.
 */
export function eachQueue<Q extends OwnQueue>(
  prefix: string,
  open: (name: string) => Q,
  connection: { host: string; port: number },
  set: (t: { name: string; queue: Q; raw: Redis }) => void,
): void {
  let t: { name: string; queue: Q; raw: Redis } | undefined;
  beforeEach(async () => {
    const name = `${prefix}-${randomUUID()}`;
    t = { name, queue: track(open(name)), raw: new Redis(connection) };
    set(t);
    await t.queue.waitUntilReady();
  });
  afterEach(async () => {
    await t?.queue.obliterate({ force: true }).catch(() => undefined);
    await closeTracked();
    t?.raw.disconnect();
  });
}
