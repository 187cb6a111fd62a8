// Job schedulers through BullMQ's API, kept and run by the module (TRA.SCHEDULER,
// TRA.SCHEDULERS), on a real Valkey.
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { withBackend, type Job } from 'bullmq';
import { closeTracked, track, until } from './helpers.js';
import { withTrafikey } from '../src/index.js';

const port = inject('port');
const connection = { host: '127.0.0.1', port };
const { Queue, Worker } = withTrafikey(withBackend);

let name: string;
let queue: InstanceType<typeof Queue>;

beforeEach(async () => {
  name = `sched-${randomUUID()}`;
  queue = track(new Queue(name, { connection }));
  await queue.waitUntilReady();
});

afterEach(async () => {
  for (const id of ['s', 'cron']) {
    await queue.removeJobScheduler(id).catch(() => undefined);
  }
  await queue.obliterate({ force: true }).catch(() => undefined);
  await closeTracked();
});

describe('job schedulers', () => {
  it('upsert makes one scheduler, read back in BullMQ fields, with its pending iteration', async () => {
    const job = await queue.upsertJobScheduler('cron', { pattern: '0 0 3 * * *', tz: 'Europe/Paris' }, { name: 'report', data: { kind: 'daily' }, opts: { priority: 2, attempts: 3 } });
    expect(job!.id).toMatch(/^repeat:cron:\d+$/);
    const at = Number(job!.id!.split(':')[2]);
    expect(at).toBeGreaterThan(Date.now());
    const s = await queue.getJobScheduler('cron');
    expect(s).toEqual({
      key: 'cron',
      name: 'report',
      next: at,
      iterationCount: 1,
      pattern: '0 0 3 * * *',
      tz: 'Europe/Paris',
      offset: 0,
      template: { data: { kind: 'daily' }, opts: { priority: 2, attempts: 3 } },
    });
    expect(await queue.getJobSchedulersCount()).toBe(1);
    expect((await queue.getJobSchedulers()).map(x => x.key)).toEqual(['cron']);
    const [pending] = await queue.getDelayed();
    expect(pending.id).toBe(job!.id);
    expect(pending.name).toBe('report');
    expect(pending.data).toEqual({ kind: 'daily' });
    expect(pending.repeatJobKey).toBe('cron');
    expect(pending.opts).toMatchObject({ priority: 2, attempts: 3, repeat: { pattern: '0 0 3 * * *' } });
    // The pending iteration is the scheduler's: removed with it, not by itself.
    await expect(pending.remove()).rejects.toThrow('belongs to a job scheduler');
    expect(await queue.removeJobScheduler('cron')).toBe(true);
    expect(await queue.removeJobScheduler('cron')).toBe(false);
    expect(await queue.getJobScheduler('cron')).toBeUndefined();
    expect(await queue.getDelayedCount()).toBe(0);
  });

  it('the server makes the iterations on time, with or without a worker', async () => {
    await queue.upsertJobScheduler('s', { every: 200 }, { name: 'tick', data: { n: 1 } });
    // The first iteration is due at once: ready as BullMQ's.
    expect(await queue.getWaitingCount()).toBe(1);
    // No worker: the server goes on making them, one per interval.
    await until(async () => (await queue.getWaitingCount()) >= 3);
    const done: Job[] = [];
    track(new Worker(name, async (job: Job) => void done.push(job), { connection }));
    await until(() => done.length >= 4);
    const ids = done.map(j => j.id!);
    expect(new Set(ids).size).toBe(ids.length);
    for (const j of done) {
      expect(j.id).toMatch(/^repeat:s:\d+$/);
      expect(j.repeatJobKey).toBe('s');
      expect(j.data).toEqual({ n: 1 });
    }
    const times = ids.map(id => Number(id.split(':')[2]));
    for (let i = 1; i < times.length; i++) {
      expect((times[i] - times[0]) % 200).toBe(0);
    }
    const s = await queue.getJobScheduler('s');
    expect(s!.iterationCount).toBeGreaterThanOrEqual(4);
    expect(s!.every).toBe(200);
  });

  it('upsert over a scheduler replaces its rule and template; its ready iteration not yet run is replaced', async () => {
    await queue.upsertJobScheduler('cron', { pattern: '10 * * * * *' }, { data: { v: 1 } });
    const [d] = await queue.getDelayed();
    await d.promote();
    expect(await queue.getWaitingCount()).toBe(1);
    await queue.upsertJobScheduler('cron', { pattern: '2 10 * * * *' }, { data: { v: 2 } });
    expect(await queue.getWaitingCount()).toBe(0);
    const delayed = await queue.getDelayed();
    expect(delayed).toHaveLength(1);
    expect(delayed[0].data).toEqual({ v: 2 });
    expect((await queue.getJobScheduler('cron'))!.pattern).toBe('2 10 * * * *');
  });
});
