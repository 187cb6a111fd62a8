// Deduplication through BullMQ's API, kept by the module (DEDUP on the producers, TRA.DEDUP,
// TRA.UNDEDUP, keepLastIfActive as KEEPLAST), on a real Valkey.
import { describe, expect, inject, it } from 'vitest';
import { withBackend, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { eachQueue, sleep, track, until } from './helpers.js';
import { withTrafikey } from '../src/index.js';

const port = inject('port');
const connection = { host: '127.0.0.1', port };
const { Queue, Worker, QueueEvents } = withTrafikey(withBackend);

let name: string;
let queue: InstanceType<typeof Queue>;
let raw: Redis;

const dedupKey = (id: string) => `emq:{bull:${name}}:dedup:${id}`;
/** The module's hash of the job kept for a deduplication id (KEEPLAST), and the adapter's own. */
const keptKey = (id: string) => `emq:{bull:${name}}:kept:${id}`;
const adapterKept = () => `emq:{bull:${name}}:b:dn`;

eachQueue(
  'dedup',
  n => new Queue(n, { connection }),
  connection,
  t => ({ name, queue, raw } = t),
);

/**
 * keepLastIfActive's holder (seq 1), taken by a worker that then dies (lease 300 ms), and a
 * duplicate (seq 2) kept for after it.
 */
async function heldByADeadWorker(id: string): Promise<Job> {
  const dead = track(new Worker(name, null, { connection, autorun: false, lockDuration: 300 }));
  const dedup = { id, keepLastIfActive: true };
  const first = await queue.add('x', { seq: 1 }, { deduplication: dedup });
  expect((await dead.getNextJob('dead-1'))?.id).toBe(first.id);
  expect((await queue.add('x', { seq: 2 }, { deduplication: dedup })).id).toBe(first.id);
  return first;
}

describe('deduplication', () => {
  it('a duplicate creates nothing, answers the holder and emits deduplicated in BullMQ fields', async () => {
    const events = track(new QueueEvents(name, { connection }));
    await events.waitUntilReady();
    const seen: Record<string, string>[] = [];
    events.on('deduplicated', (e: Record<string, string>) => void seen.push(e));
    const a = await queue.add('x', { n: 1 }, { jobId: 'a1', deduplication: { id: 'd1' } });
    const b = await queue.add('x', { n: 2 }, { jobId: 'a2', deduplication: { id: 'd1' } });
    expect(a.id).toBe('a1');
    expect(b.id).toBe('a1');
    expect(await queue.count()).toBe(1);
    expect(await queue.getJob('a2')).toBeUndefined();
    expect(await queue.getDeduplicationJobId('d1')).toBe('a1');
    expect((await queue.getJob('a1'))!.deduplicationId).toBe('d1');
    await until(() => seen.length === 1);
    expect(seen[0]).toMatchObject({ jobId: 'a1', deduplicationId: 'd1' });
    // The module's key holds the holder's module id (the custom id is its ALIAS).
    expect(await raw.get(dedupKey('d1'))).toMatch(/^JOB/);
  });

  it('the id is released when its job finishes (no ttl), kept for its ttl otherwise', async () => {
    await queue.add('x', {}, { deduplication: { id: 'run' } });
    await queue.add('x', {}, { deduplication: { id: 'ttl', ttl: 60000 } });
    track(new Worker(name, async () => 1, { connection }));
    await until(async () => (await queue.getCompletedCount()) === 2);
    expect(await queue.getDeduplicationJobId('run')).toBeNull();
    expect(await queue.getDeduplicationJobId('ttl')).not.toBeNull();
    await queue.add('x', {}, { deduplication: { id: 'run' } });
    await queue.add('x', {}, { deduplication: { id: 'ttl', ttl: 60000 } });
    await until(async () => (await queue.getCompletedCount()) === 3);
    await sleep(100);
    expect(await queue.getJobCounts('completed', 'waiting')).toEqual({ completed: 3, waiting: 0 });
  });

  it('removeDeduplicationKey releases the id; a job removes it only while it holds it', async () => {
    const a = await queue.add('x', {}, { deduplication: { id: 'k' } });
    expect(await queue.removeDeduplicationKey('k')).toBe(1);
    const b = await queue.add('x', {}, { deduplication: { id: 'k' } });
    expect(b.id).not.toBe(a.id);
    expect(await a.removeDeduplicationKey()).toBe(false);
    expect(await b.removeDeduplicationKey()).toBe(true);
    expect(await queue.getDeduplicationJobId('k')).toBeNull();
  });

  it('replace swaps a delayed holder for the new job', async () => {
    const a = await queue.add('x', { v: 1 }, { delay: 60000, deduplication: { id: 'r', replace: true } });
    const b = await queue.add('x', { v: 2 }, { delay: 60000, deduplication: { id: 'r', replace: true } });
    expect(b.id).not.toBe(a.id);
    expect(await queue.getJob(a.id!)).toBeUndefined();
    expect(await queue.getDeduplicationJobId('r')).toBe(b.id);
    expect(await queue.getDelayedCount()).toBe(1);
  });

  it('keepLastIfActive: the latest duplicate while the holder is active runs after it, once', async () => {
    let release!: () => void;
    const gate = new Promise<void>(ok => (release = ok));
    const seen: unknown[] = [];
    track(
      new Worker(
        name,
        async (job: Job) => {
          seen.push(job.data);
          if (seen.length === 1) {
            await gate;
          }
        },
        { connection, concurrency: 5 },
      ),
    );
    const first = await queue.add('x', { seq: 1 }, { deduplication: { id: 'kl', keepLastIfActive: true } });
    await until(() => seen.length === 1);
    for (const seq of [2, 3, 4]) {
      const j = await queue.add('x', { seq }, { deduplication: { id: 'kl', keepLastIfActive: true } });
      expect(j.id).toBe(first.id);
    }
    expect(await queue.count()).toBe(0);
    // Kept by the server, the last one given; the adapter keeps nothing of its own.
    expect(JSON.parse((await raw.hget(keptKey('kl'), 'o'))!).o.deduplication).toMatchObject({ id: 'kl' });
    expect(await raw.exists(adapterKept())).toBe(0);
    release();
    await until(async () => (await queue.getCompletedCount()) === 2);
    await sleep(100);
    expect(seen).toEqual([{ seq: 1 }, { seq: 4 }]);
    expect(await raw.exists(keptKey('kl'))).toBe(0);
  });

  it('keepLastIfActive: a holder the server fails (it stalled more than allowed) still lets the kept job run', async () => {
    // The holder's worker dies with it: no finish of the adapter's brings the kept job in.
    const first = await heldByADeadWorker('kl2');
    expect(await raw.exists(keptKey('kl2'))).toBe(1);
    const seen: unknown[] = [];
    track(
      new Worker(name, async (job: Job) => void seen.push(job.data), {
        connection,
        maxStalledCount: 0,
        stalledInterval: 200,
        lockDuration: 300,
      }),
    );
    await until(async () => (await queue.getJobState(first.id!)) === 'failed');
    expect((await queue.getJob(first.id!))?.failedReason).toMatch(/stalled/);
    await until(() => seen.length === 1);
    expect(seen).toEqual([{ seq: 2 }]);
    expect(await raw.exists(keptKey('kl2'))).toBe(0);
  });

  it('keepLastIfActive: a holder back in wait after a stall keeps the kept job until it finishes', async () => {
    const first = await heldByADeadWorker('kl3');
    // Paused: the holder, taken back by upkeep, waits while the worker's checks run.
    await queue.pause();
    const seen: unknown[] = [];
    const stalled: string[] = [];
    const w = track(
      new Worker(name, async (job: Job) => void seen.push(job.data), {
        connection,
        maxStalledCount: 1,
        stalledInterval: 200,
        lockDuration: 300,
      }),
    );
    w.on('stalled', (id: string) => void stalled.push(id));
    // The check that reports the stall ran after upkeep put the holder back.
    await until(() => stalled.includes(first.id!));
    expect(await raw.exists(keptKey('kl3'))).toBe(1);
    await queue.resume();
    await until(() => seen.length === 2);
    expect(seen).toEqual([{ seq: 1 }, { seq: 2 }]);
    expect(await raw.exists(keptKey('kl3'))).toBe(0);
  });
});
