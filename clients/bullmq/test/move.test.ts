// Moving a queue's pending work from BullMQ's own store to trafikey, on the server a team
// already runs: the module loaded beside BullMQ's keys, in the same database.
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import {
  withBackend,
  Queue as BullQueue,
  Worker as BullWorker,
  FlowProducer as BullFlowProducer,
  type Job,
} from 'bullmq';
import { Redis } from 'ioredis';
import { closeTracked, track, until } from './helpers.js';
import { escapeQueueName, moveFromBullMQ, movedId, withTrafikey } from '../src/index.js';

const port = inject('port');
const connection = { host: '127.0.0.1', port };
const { Queue, Worker } = withTrafikey(withBackend);

let name: string;
let from: BullQueue;
let to: InstanceType<typeof Queue>;
let admin: Redis;

beforeEach(async () => {
  name = `move-${randomUUID()}`;
  from = track(new BullQueue(name, { connection }));
  to = track(new Queue(name, { connection }));
  admin = new Redis(connection);
  await Promise.all([from.waitUntilReady(), to.waitUntilReady()]);
});

afterEach(async () => {
  await from.obliterate({ force: true }).catch(() => undefined);
  await to.obliterate({ force: true }).catch(() => undefined);
  await closeTracked();
  admin.disconnect();
});

/** The ms a delayed job falls due on trafikey: its delayed set's score. */
async function dueOnTrafikey(id: string): Promise<number> {
  const jobId = (await admin.hget(`emq:{${escapeQueueName(`bull:${name}`)}}:alias`, id)) ?? id;
  return Number(await admin.zscore(`emq:{${escapeQueueName(`bull:${name}`)}}:delayed`, jobId));
}

/** The ms a delayed job falls due on BullMQ's store (its score is the time × 4 096 plus an order). */
async function dueOnBullMQ(id: string): Promise<number> {
  return Math.floor(Number(await admin.zscore(`bull:${name}:delayed`, id)) / 0x1000);
}

/**
 * The old store as a move sees it when a worker there takes job `id` between the move's read
 * and its removal (a worker whose fetch was under way when the queue was paused).
 */
function racedOn(id: string): BullQueue {
  const racer = track(new BullWorker(name, null, { connection, autorun: false }));
  return new Proxy(from, {
    get(target, key) {
      if (key === 'remove') {
        return async (jobId: string) => {
          if (jobId === id) {
            await target.resume();
            expect((await racer.getNextJob('racer'))?.id).toBe(id);
            await target.pause();
          }
          return target.remove(jobId);
        };
      }
      const v = Reflect.get(target, key, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

describe('moveFromBullMQ', () => {
  it('moves waiting, prioritized and delayed jobs, a scheduler and the limits, keeps order, ids and due times, and is a no-op run again', async () => {
    // A job that failed once and waits out its backoff, one of its three attempts spent.
    const retried = await from.add('retried', { n: 0 }, { attempts: 3, backoff: { type: 'fixed', delay: 120_000 } });
    const oldWorker = new BullWorker(name, null, { connection, autorun: false });
    const token = 'move-test';
    const taken = await oldWorker.getNextJob(token);
    expect(taken?.id).toBe(retried.id);
    await taken!.moveToFailed(new Error('once'), token);
    await oldWorker.close();
    expect(await from.getJobState(retried.id!)).toBe('delayed');
    const numbered = await from.addBulk([
      { name: 'a', data: { n: 1 } },
      { name: 'b', data: { n: 2 } },
      { name: 'c', data: { n: 3 } },
    ]);
    await from.add('d', { n: 4 }, { jobId: 'order-7', attempts: 4, removeOnComplete: 10 });
    await from.add('p5', { n: 5 }, { priority: 5 });
    await from.add('p1', { n: 6 }, { priority: 1 });
    const later = await from.add('later', { n: 7 }, { delay: 60_000 });
    const soon = await from.add('soon', { n: 8 }, { delay: 1_000 });
    await from.upsertJobScheduler('tick', { every: 3_600_000 }, { name: 'tick', data: { t: 1 } });
    await from.setGlobalConcurrency(3);
    await from.setGlobalRateLimit(100, 1000);
    const due = {
      later: await dueOnBullMQ(later.id!),
      soon: await dueOnBullMQ(soon.id!),
      retried: await dueOnBullMQ(retried.id!),
    };

    const report = await moveFromBullMQ(from, to);
    const movedAt = Date.now();

    expect(report).toEqual({ moved: 9, renamed: 8, schedulers: 1, paused: true, active: 0, left: [] });
    // Nothing pending is left on the old store, which stays paused.
    expect(await from.getJobCounts('wait', 'prioritized', 'delayed', 'active')).toEqual({
      wait: 0,
      prioritized: 0,
      delayed: 0,
      active: 0,
    });
    expect(await from.getJobSchedulersCount()).toBe(0);
    expect(await from.isPaused()).toBe(true);

    // On trafikey: each job under its id (BullMQ's numbers as bullmq-<n>), with its name,
    // data, options and creation time; the delayed ones falling due when they would have.
    for (const j of numbered) {
      const moved = await to.getJob(movedId(j.id!));
      expect(moved?.name).toBe(j.name);
      expect(moved?.data).toEqual(j.data);
      expect(moved?.timestamp).toBe(j.timestamp);
    }
    expect((await to.getJob('order-7'))?.opts).toMatchObject({ attempts: 4, removeOnComplete: 10 });
    expect(await to.getJobState(movedId(later.id!))).toBe('delayed');
    expect(Math.abs((await dueOnTrafikey(movedId(later.id!))) - due.later)).toBeLessThanOrEqual(1);
    expect(Math.abs((await dueOnTrafikey(movedId(retried.id!))) - due.retried)).toBeLessThanOrEqual(1);
    if (due.soon > movedAt) {
      expect(Math.abs((await dueOnTrafikey(movedId(soon.id!))) - due.soon)).toBeLessThanOrEqual(1);
    }
    // Its attempts left: three less the one spent.
    expect((await to.getJob(movedId(retried.id!)))?.opts.attempts).toBe(2);
    expect(await to.getJobCounts('prioritized')).toEqual({ prioritized: 2 });
    expect((await to.getJobSchedulers()).map(s => s.key)).toEqual(['tick']);
    expect(await to.getGlobalConcurrency()).toBe(3);
    expect(await to.getGlobalRateLimit()).toEqual({ max: 100, duration: 1000 });

    // Run again: nothing left to move, nothing added twice.
    const again = await moveFromBullMQ(from, to);
    expect(again).toEqual({ moved: 0, renamed: 0, schedulers: 0, paused: false, active: 0, left: [] });
    expect(await to.getJobCounts('prioritized')).toEqual({ prioritized: 2 });

    // A worker on trafikey takes them as BullMQ's would have: the waiting ones in the order
    // they were added, then the prioritized ones by priority, then the delayed one once due.
    await to.removeGlobalRateLimit();
    const seen: string[] = [];
    track(new Worker(name, async (job: Job) => void seen.push(job.name), { connection }));
    await until(() => seen.includes('soon'));
    expect(seen.filter(n => ['a', 'b', 'c', 'd', 'p5', 'p1'].includes(n))).toEqual(['a', 'b', 'c', 'd', 'p1', 'p5']);
    expect(seen).not.toContain('later');
    expect(seen).not.toContain('retried');
  });

  it('leaves a job an old worker holds to finish there, and a flow on the old store', async () => {
    let release!: () => void;
    const held = new Promise<void>(r => (release = r));
    const oldWorker = track(
      new BullWorker(
        name,
        async (job: Job) => {
          if (job.name === 'slow') {
            await held;
          }
          return job.name;
        },
        { connection },
      ),
    );
    const slow = await from.add('slow', {});
    await until(async () => (await from.getJobState(slow.id!)) === 'active');
    // The worker takes nothing more; the job it holds runs on.
    await oldWorker.pause(true);
    const flow = track(new BullFlowProducer({ connection }));
    const tree = await flow.add({
      name: 'parent',
      queueName: `${name}-parents`,
      children: [{ name: 'child', queueName: name, data: {} }],
    });
    const child = tree.children![0].job;
    const rest = await from.add('rest', {});

    const report = await moveFromBullMQ(from, to);

    release();
    expect(report.active).toBe(1);
    expect(report.moved).toBe(1);
    expect(report.left).toEqual([{ id: child.id, why: expect.stringContaining('flow') }]);
    expect(await to.getJob(movedId(rest.id!))).toBeTruthy();
    expect(await to.getJob(movedId(slow.id!))).toBeUndefined();
    expect(await from.getJobState(child.id!)).toBe('waiting');
    await until(async () => (await from.getJobState(slow.id!)) === 'completed');
    await track(new BullQueue(`${name}-parents`, { connection })).obliterate({ force: true });
  });

  it('a job a worker of the old store takes while it moves is not kept on the new one', async () => {
    const [a, b] = await from.addBulk([
      { name: 'a', data: {} },
      { name: 'b', data: {} },
    ]);
    const report = await moveFromBullMQ(racedOn(a.id!), to);
    expect(report).toMatchObject({
      moved: 1,
      active: 1,
      left: [{ id: a.id, why: expect.stringContaining('during the move') }],
    });
    expect(await from.getJobState(a.id!)).toBe('active');
    expect(await to.getJob(movedId(a.id!))).toBeUndefined();
    expect((await to.getJob(movedId(b.id!)))?.name).toBe('b');
  });

  it('such a job whose add was deduplicated leaves the job holding its id alone', async () => {
    const holder = await to.add('holder', {}, { jobId: 'holder', deduplication: { id: 'k' } });
    const a = await from.add('a', {}, { deduplication: { id: 'k' } });
    const report = await moveFromBullMQ(racedOn(a.id!), to);
    expect(report).toMatchObject({ moved: 0, left: [{ id: a.id }] });
    expect((await to.getJob(holder.id!))?.name).toBe('holder');
  });

  it('a move that stopped half way moves the rest when run again, none twice', async () => {
    const jobs = await from.addBulk(Array.from({ length: 7 }, (_, i) => ({ name: `j${i}`, data: { i } })));
    // As a move that stopped after adding two jobs to trafikey, before removing them here.
    await to.addBulk(
      jobs
        .slice(0, 2)
        .map(j => ({ name: j.name, data: j.data, opts: { jobId: movedId(j.id!), timestamp: j.timestamp } })),
    );
    const report = await moveFromBullMQ(from, to, { batch: 3 });
    expect(report).toMatchObject({ moved: 7, left: [] });
    expect(await to.count()).toBe(7);
    expect(await from.getJobCounts('wait')).toEqual({ wait: 0 });
    const names = (await to.getJobs(['wait'], 0, -1, true)).map(j => j.name);
    expect(names).toEqual(jobs.map(j => j.name));
  });
});
