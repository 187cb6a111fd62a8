// Rate limits and global concurrency through BullMQ's API, kept and obeyed by the module
// (TRA.LIMIT, TRA.LIMITS), on a real Valkey.
import { describe, expect, inject, it } from 'vitest';
import { withBackend, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { eachQueue, sleep, track, until } from './helpers.js';
import { withTrafikey } from '../src/index.js';

const port = inject('port');
const connection = { host: '127.0.0.1', port };
const { Queue, Worker } = withTrafikey(withBackend);

let name: string;
let queue: InstanceType<typeof Queue>;
let raw: Redis;

/** The module's own view: TRA.LIMITS of the queue, as an object. */
async function limits(): Promise<Record<string, unknown>> {
  const q = `bull:${name}`;
  const r = (await raw.call('TRA.LIMITS', 2, `emq:{${q}}:meta`, `emq:{${q}}:active`)) as unknown[];
  const o: Record<string, unknown> = {};
  for (let i = 0; i + 1 < r.length; i += 2) {
    o[String(r[i])] = r[i + 1];
  }
  return o;
}

eachQueue(
  'lim',
  n => new Queue(n, { connection }),
  connection,
  t => ({ name, queue, raw } = t),
);

describe('rate limits', () => {
  it("a worker's limiter is its queue's rate limit: a full window claims nothing more", async () => {
    const done: string[] = [];
    const worker = track(
      new Worker(name, async (job: Job) => void done.push(job.id!), {
        connection,
        limiter: { max: 2, duration: 60000 },
      }),
    );
    await worker.waitUntilReady();
    expect(await limits()).toMatchObject({ 'rate-max': 2, 'rate-ms': 60000 });
    await queue.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'j', data: i })));
    await until(() => done.length === 2);
    await sleep(300);
    expect(done).toHaveLength(2);
    expect(await queue.getJobCounts('waiting', 'completed')).toEqual({ waiting: 3, completed: 2 });
    expect(await queue.getRateLimitTtl()).toBeGreaterThan(0);
    expect(await queue.getRateLimitTtl()).toBeLessThanOrEqual(60000);
    // Ending the window lets the next claims proceed (BullMQ deletes its limiter key).
    expect(await queue.removeRateLimitKey()).toBe(1);
    await until(() => done.length === 4);
  });

  it('a global rate limit is set, read, counted in getRateLimitTtl and removed', async () => {
    expect(await queue.getGlobalRateLimit()).toBeNull();
    expect(await queue.getRateLimitTtl()).toBe(-2);
    await queue.setGlobalRateLimit(1, 60000);
    expect(await queue.getGlobalRateLimit()).toEqual({ max: 1, duration: 60000 });
    expect(await queue.getMeta()).toMatchObject({ max: 1, duration: 60000 });
    await queue.add('a', {});
    await queue.add('b', {});
    const worker = track(new Worker(name, null, { connection }));
    expect(await worker.getNextJob('t1', { block: false })).toBeDefined();
    expect(await worker.getNextJob('t2', { block: false })).toBeUndefined();
    expect(await queue.getRateLimitTtl()).toBeGreaterThan(0);
    // With maxJobs above the window's count nothing holds the queue.
    expect(await queue.getRateLimitTtl(2)).toBe(0);
    await queue.removeGlobalRateLimit();
    expect(await queue.getGlobalRateLimit()).toBeNull();
    expect(await queue.getRateLimitTtl()).toBe(-2);
    expect(await limits()).toMatchObject({ 'rate-max': null, count: 0 });
    expect(await worker.getNextJob('t3', { block: false })).toBeDefined();
  });

  it('queue.rateLimit with no rate limit set: the worker that meets RateLimitError waits its time, the job back unattempted', async () => {
    await queue.add('a', {});
    let runs = 0;
    const worker = track(
      new Worker(
        name,
        async () => {
          runs++;
          await queue.rateLimit(60000);
          throw Worker.RateLimitError();
        },
        { connection },
      ),
    );
    await until(async () => runs === 1 && (await queue.getWaitingCount()) === 1);
    const [job] = await queue.getWaiting();
    expect(job.attemptsMade).toBe(0);
    expect(job.attemptsStarted).toBe(1);
    expect(await queue.getRateLimitTtl()).toBeGreaterThan(59000);
    await sleep(300);
    expect(runs).toBe(1);
    await worker.close();
  });
});

describe('global concurrency', () => {
  it('caps the jobs active across workers, read back by getGlobalConcurrency and isMaxed', async () => {
    expect(await queue.getGlobalConcurrency()).toBeNull();
    await queue.setGlobalConcurrency(1);
    expect(await queue.getGlobalConcurrency()).toBe(1);
    expect(await queue.getMeta()).toMatchObject({ concurrency: 1 });
    let release!: () => void;
    const gate = new Promise<void>(ok => (release = ok));
    let running = 0;
    let most = 0;
    const body = async () => {
      running++;
      most = Math.max(most, running);
      await gate;
      running--;
    };
    track(new Worker(name, body, { connection, concurrency: 5 }));
    track(new Worker(name, body, { connection, concurrency: 5 }));
    await queue.addBulk(Array.from({ length: 4 }, (_, i) => ({ name: 'j', data: i })));
    await until(() => running === 1);
    await sleep(300);
    expect(most).toBe(1);
    expect(await queue.isMaxed()).toBe(true);
    expect(await queue.getActiveCount()).toBe(1);
    release();
    await until(async () => (await queue.getCompletedCount()) === 4);
    expect(most).toBe(1);
    expect(await queue.isMaxed()).toBe(false);
    await queue.removeGlobalConcurrency();
    expect(await queue.getGlobalConcurrency()).toBeNull();
  });
});
