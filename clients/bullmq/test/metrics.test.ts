// A worker's `metrics` option, counted by the module as each finish writes (METRICS), and read
// back through BullMQ's getMetrics and its Prometheus export, on a real Valkey.
import { describe, expect, inject, it } from 'vitest';
import { withBackend, UnrecoverableError } from 'bullmq';
import type { Redis } from 'ioredis';
import { eachQueue, track, until } from './helpers.js';
import { withTrafikey } from '../src/index.js';

const port = inject('port');
const connection = { host: '127.0.0.1', port };
const { Queue, Worker } = withTrafikey(withBackend);

let name: string;
let queue: InstanceType<typeof Queue>;
let raw: Redis;

const key = (role: string) => `emq:{bull:${name}}:${role}`;

eachQueue(
  'met',
  n => new Queue(n, { connection }),
  connection,
  t => ({ name, queue, raw } = t),
);

/** A worker with metrics that completes jobs whose data is `ok` and fails the others for good. */
function worker(done: { n: number }, metrics = true) {
  return track(
    new Worker(
      name,
      async job => {
        if (job.data !== 'ok') {
          throw new UnrecoverableError('no');
        }
        return 1;
      },
      { connection, ...(metrics ? { metrics: { maxDataPoints: 60 } } : {}) },
    ),
  )
    .on('completed', () => done.n++)
    .on('failed', () => done.n++);
}

describe('metrics', () => {
  it('counts completed and failed jobs in the server, read by getMetrics', async () => {
    const done = { n: 0 };
    worker(done);
    await queue.addBulk([...Array(5)].map(() => ({ name: 'j', data: 'ok' })));
    await queue.addBulk([...Array(2)].map(() => ({ name: 'j', data: 'bad' })));
    await until(() => done.n === 7);
    const completed = await queue.getMetrics('completed');
    expect(completed.meta.count).toBe(5);
    expect(completed.count).toBe(completed.data.length);
    // Every job is in an ended minute's point or in the current minute.
    expect(completed.data.reduce((a, b) => a + b, 0) + (5 - completed.meta.prevCount)).toBe(5);
    expect(completed.meta.prevTS).toBeGreaterThan(0);
    expect((await queue.getMetrics('failed')).meta.count).toBe(2);
    const text = await queue.exportPrometheusMetrics();
    expect(text).toContain(`bullmq_job_completed_total{queue="${name}"} 5`);
    expect(text).toContain(`bullmq_job_failed_total{queue="${name}"} 2`);
  });

  it('pushes an ended minute and the empty ones after it, pages through them, and is obliterated', async () => {
    const done = { n: 0 };
    worker(done);
    const now = Number((await raw.time())[0]) * 1000;
    const threeAgo = (Math.floor(now / 60000) - 3) * 60000;
    await raw.hset(key('metrics:completed'), 'count', 4, 'prevTS', threeAgo, 'prevCount', 1);
    await queue.add('j', 'ok');
    await until(() => done.n === 1);
    const m = await queue.getMetrics('completed');
    expect(m.meta.count).toBe(5);
    expect(m.meta.prevCount).toBe(4);
    // Three minutes on, or four if a minute began meanwhile: the ended minute's 3 jobs last.
    const minutes = Math.floor(m.meta.prevTS / 60000) - Math.floor(threeAgo / 60000);
    expect(m.data).toEqual([...Array(minutes - 1).fill(0), 3]);
    expect((await queue.getMetrics('completed', 0, 0)).data).toEqual([0]);
    expect((await queue.getMetrics('completed', 0, 0)).count).toBe(minutes);
    await queue.obliterate({ force: true });
    expect(await raw.exists(key('metrics:completed'), key('metrics:completed:data'))).toBe(0);
  });

  it('counts nothing for a worker without the option', async () => {
    const done = { n: 0 };
    worker(done, false);
    await queue.add('j', 'ok');
    await until(() => done.n === 1);
    expect(await queue.getMetrics('completed')).toEqual({
      meta: { count: 0, prevTS: 0, prevCount: 0 },
      data: [],
      count: 0,
    });
  });
});
