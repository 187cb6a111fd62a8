// Job schedulers through BullMQ's API, kept and run by the module (TRA.SCHEDULER,
// TRA.SCHEDULERS), on a real Valkey. The rule: each iteration is made once, at its own time
// (ready) or when a worker takes the pending one (delayed at its time), whichever is first;
// so iterations come on time whether or not a worker runs, and an iteration promoted early
// and taken brings its successor at once.
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { withBackend, type Job, type JobSchedulerJobOptions } from 'bullmq';
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
    const job = await queue.upsertJobScheduler(
      'cron',
      { pattern: '0 0 3 * * *', tz: 'Europe/Paris' },
      { name: 'report', data: { kind: 'daily' }, opts: { priority: 2, attempts: 3 } },
    );
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

  it('getJobSchedulers lists by next time, soonest first or last, a page at a time', async () => {
    const now = Date.now();
    await queue.upsertJobScheduler('s', { every: 60_000, startDate: now + 120_000 }, { name: 'later' });
    await queue.upsertJobScheduler('cron', { every: 60_000, startDate: now + 60_000 }, { name: 'sooner' });
    const keys = async (start: number, end: number, asc: boolean) =>
      (await queue.getJobSchedulers(start, end, asc)).map(x => x.key);
    expect(await keys(0, -1, true)).toEqual(['cron', 's']);
    expect(await keys(0, -1, false)).toEqual(['s', 'cron']);
    expect(await keys(0, 0, true)).toEqual(['cron']);
    expect(await keys(1, 1, false)).toEqual(['cron']);
  });

  it('the server makes the iterations on time, with or without a worker, numbered', async () => {
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
    // Each iteration's number, as BullMQ's repeat.count: the first is 1, in time order.
    const counts = [...done]
      .sort((a, b) => Number(a.id!.split(':')[2]) - Number(b.id!.split(':')[2]))
      .map(j => (j.opts as JobSchedulerJobOptions).repeat!.count);
    expect(counts[0]).toBe(1);
    for (let i = 1; i < counts.length; i++) {
      expect(counts[i]).toBeGreaterThan(counts[i - 1]!);
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

  it('an iteration promoted early and taken brings its successor at once; its old time makes nothing more', async () => {
    const startDate = Date.now() + 60_000;
    const job = await queue.upsertJobScheduler('s', { every: 60_000, startDate }, { name: 'tick' });
    const at = Number(job!.id!.split(':')[2]);
    await job!.promote();
    const taken: Job[] = [];
    track(new Worker(name, async (j: Job) => void taken.push(j), { connection }));
    await until(() => taken.length === 1);
    expect(taken[0].id).toBe(`repeat:s:${at}`);
    expect((taken[0].opts as JobSchedulerJobOptions).repeat!.count).toBe(1);
    const [next] = await queue.getDelayed();
    expect(next.id).toBe(`repeat:s:${at + 60_000}`);
    expect((next.opts as JobSchedulerJobOptions).repeat!.count).toBe(2);
    const s = await queue.getJobScheduler('s');
    expect([s!.next, s!.iterationCount]).toEqual([at + 60_000, 2]);
  });

  it('drain and clean keep the pending iteration; obliterate deletes the schedulers', async () => {
    await queue.upsertJobScheduler('s', { every: 60_000, startDate: Date.now() + 60_000 }, { name: 'tick' });
    await queue.add('plain', {}, { delay: 60_000 });
    await queue.add('plain', {});
    await queue.drain(true);
    expect(await queue.getWaitingCount()).toBe(0);
    const delayed = await queue.getDelayed();
    expect(delayed.map(j => j.name)).toEqual(['tick']);
    // Promoted, it waits; clean of wait keeps it too.
    await delayed[0].promote();
    await queue.add('plain', {});
    await queue.clean(0, 100, 'wait');
    expect((await queue.getWaiting()).map(j => j.name)).toEqual(['tick']);
    await queue.pause();
    await queue.obliterate({ force: true, count: 1 });
    expect(await queue.getJobSchedulersCount()).toBe(0);
    expect(await queue.getJobScheduler('s')).toBeUndefined();
  });

  it('upsert of a pattern whose iteration is still being processed is refused', async () => {
    const job = await queue.upsertJobScheduler('cron', { pattern: '0 0 1 1 *' }, { data: { foo: 'bar' } });
    await job!.promote();
    let refusal = '';
    const worker = track(
      new Worker(
        name,
        async () => {
          await queue.removeJobScheduler('cron');
          await queue
            .upsertJobScheduler('cron', { pattern: '0 0 1 1 *' }, { data: { foo: 'baz' } })
            .catch((e: Error) => {
              refusal = e.message;
            });
        },
        { connection },
      ),
    );
    await until(() => refusal !== '');
    expect(refusal).toBe('Cannot create job scheduler iteration - job ID already exists. addJobScheduler');
    expect(await queue.getJobSchedulersCount()).toBe(0);
    expect(await queue.getDelayedCount()).toBe(0);
    await worker.close();
  });
});
