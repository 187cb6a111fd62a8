// What BullMQ's users do most, on a real Valkey with the trafikey module.
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { withBackend, UnrecoverableError, type Job } from 'bullmq';
import type { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { closeTracked, sleep, track, until } from './helpers.js';
import { withTrafikey, createTrafikeyBackend, escapeQueueName, isBranded, mintJobId } from '../src/index.js';
import { gather } from '../src/connection.js';

const port = inject('port');
const connection = { host: '127.0.0.1', port };
const { Queue, Worker, QueueEvents, QueueEventsProducer, FlowProducer } = withTrafikey(withBackend);

let name: string;
let queue: InstanceType<typeof Queue>;

beforeEach(async () => {
  name = `conf-${randomUUID()}`;
  queue = track(new Queue(name, { connection }));
  await queue.waitUntilReady();
});

afterEach(async () => {
  await queue.obliterate({ force: true }).catch(() => undefined);
  await closeTracked();
});

describe('connecting', () => {
  it('says to run EMQ.INSTALL when the fence is absent', async () => {
    const q = new Queue(name, { connection: { ...connection, db: 3 } });
    await expect(q.waitUntilReady()).rejects.toThrow('run EMQ.INSTALL 1 {emq}:version');
    await q.close();
  });

  it('says the module is not loaded on a plain server', async () => {
    const q = new Queue(name, { connection: { host: '127.0.0.1', port: inject('plainPort') } });
    await expect(q.waitUntilReady()).rejects.toThrow('module is not loaded');
    await q.close();
  });

  it('shares one command connection among the queues and workers of a process', async () => {
    const admin = new Redis({ host: '127.0.0.1', port });
    const tag = `tk-${randomUUID()}`;
    const conn = { ...connection, connectionName: tag };
    // Workers' blocking connections carry BullMQ's client names, not the tag.
    const tagged = async () =>
      String(await admin.client('LIST'))
        .split('\n')
        .filter(l => l.includes(` name=${tag} `)).length;
    try {
      const queues = [0, 1, 2].map(i => new Queue(`${name}-${i}`, { connection: conn }));
      const workers = [0, 1].map(() => new Worker(name, async () => 1, { connection: conn, autorun: false }));
      await Promise.all([...queues, ...workers].map(x => x.waitUntilReady()));
      expect(await tagged()).toBe(1);
      await queues[0].close();
      await workers[0].close();
      await queues[1].add('x', {});
      expect(await queues[1].count()).toBe(1);
      expect(await tagged()).toBe(1);
      await queues[1].obliterate({ force: true });
      await Promise.all([queues[1], queues[2], workers[1]].map(x => x.close()));
      await until(async () => (await tagged()) === 0);
      const again = new Queue(name, { connection: conn });
      await again.waitUntilReady();
      expect(await tagged()).toBe(1);
      await again.close();
      await until(async () => (await tagged()) === 0);
    } finally {
      admin.disconnect();
    }
  });

  it('keeps queue names apart once escaped (braces, spaces, percent)', async () => {
    const a = track(new Queue('a{b}', { connection }));
    const b = track(new Queue('a%7Bb%7D', { connection }));
    const c = track(new Queue('with space', { connection }));
    await a.add('x', {});
    await c.add('x', {});
    expect(await a.count()).toBe(1);
    expect(await b.count()).toBe(0);
    expect(await c.count()).toBe(1);
    await a.obliterate({ force: true });
    await c.obliterate({ force: true });
  });
});

describe('adding', () => {
  it('mints branded ids and stores name, data and options', async () => {
    const job = await queue.add('mail', { to: 'a@b' }, { attempts: 3, backoff: { type: 'fixed', delay: 10 } });
    expect(isBranded(job.id!)).toBe(true);
    const got = await queue.getJob(job.id!);
    expect(got!.name).toBe('mail');
    expect(got!.data).toEqual({ to: 'a@b' });
    expect(got!.opts.attempts).toBe(3);
    expect(await got!.getState()).toBe('waiting');
  });

  it('addBulk with delay and priority', async () => {
    const jobs = await queue.addBulk([
      { name: 'a', data: 1 },
      { name: 'b', data: 2, opts: { delay: 60000 } },
      { name: 'c', data: 3, opts: { priority: 5 } },
    ]);
    expect(jobs).toHaveLength(3);
    const counts = await queue.getJobCounts('waiting', 'delayed', 'prioritized');
    expect(counts).toEqual({ waiting: 1, delayed: 1, prioritized: 1 });
    expect(await jobs[1].getState()).toBe('delayed');
    expect(await jobs[2].getState()).toBe('prioritized');
  });

  it('runs a delayed job once it is due (the server promotes it)', async () => {
    const start = Date.now();
    const done = new Promise<number>(ok => {
      track(new Worker(name, async () => ok(Date.now()), { connection }));
    });
    await queue.add('later', {}, { delay: 300 });
    expect((await done) - start).toBeGreaterThanOrEqual(280);
  });

  it('serves priorities lowest first, unprioritized before them', async () => {
    await queue.add('p3', {}, { priority: 3 });
    await queue.add('p1', {}, { priority: 1 });
    await queue.add('none', {});
    await queue.add('p2', {}, { priority: 2 });
    expect(await queue.getCountsPerPriority([0, 1, 2, 3, 4])).toEqual({ 0: 1, 1: 1, 2: 1, 3: 1, 4: 0 });
    const order: string[] = [];
    track(new Worker(name, async (job: Job) => void order.push(job.name), { connection }));
    await until(() => order.length === 4);
    expect(order).toEqual(['none', 'p1', 'p2', 'p3']);
  });

  it('adds made in one turn, more than one write of them, all arrive in the order made', async () => {
    const other = track(new Queue(`${name}-b`, { connection }));
    await other.waitUntilReady();
    // 40 adds to each queue in one turn: the socket is let go after every 16 calls.
    const made = await Promise.all(Array.from({ length: 80 }, (_, i) => (i % 2 ? other : queue).add(`j${i}`, { i })));
    expect(new Set(made.map(j => j.id)).size).toBe(80);
    const order = async (q: InstanceType<typeof Queue>) => (await q.getWaiting(0, -1)).map(j => j.name);
    const want = (odd: number) => Array.from({ length: 40 }, (_, k) => `j${2 * k + odd}`);
    expect(await order(queue)).toEqual(want(0));
    expect(await order(other)).toEqual(want(1));
    const done: string[] = [];
    track(new Worker(name, async (job: Job) => void done.push(job.name), { connection, concurrency: 40 }));
    await until(async () => (await queue.getCompletedCount()) === 40);
    expect(new Set(done).size).toBe(40);
    await other.obliterate({ force: true });
  });

  it("a call that carries a write's worth of jobs leaves with the next call, not at the end of the turn", async () => {
    // A worker at concurrency 50 ends its jobs in one turn: the server starts on the first
    // TRA.COMPLETESNEXT of 16 while Node still makes the others.
    const c = new Redis(connection);
    try {
      await c.ping();
      const socket = c.stream;
      gather(c, 16);
      const full = c.call('PING');
      expect(socket.writableLength).toBeGreaterThan(0);
      gather(c, 1);
      expect(socket.writableLength).toBe(0);
      const next = c.call('PING');
      expect(socket.writableLength).toBeGreaterThan(0);
      expect(await Promise.all([full, next])).toEqual(['PONG', 'PONG']);
      // Calls of one job each: sixteen are held together, the seventeenth lets them go.
      const held = Array.from({ length: 16 }, () => (gather(c, 1), c.call('PING')));
      expect(socket.writableLength).toBeGreaterThan(0);
      gather(c, 1);
      expect(socket.writableLength).toBe(0);
      await Promise.all(held);
    } finally {
      c.disconnect();
    }
  });

  it("addBulk over one call's 250 jobs, with custom ids (one job per id)", async () => {
    const jobs = await queue.addBulk(
      Array.from({ length: 600 }, (_, i) => ({
        name: 'b',
        data: i,
        opts: i % 100 === 0 ? { jobId: `bulk-${i}` } : {},
      })),
    );
    expect(jobs).toHaveLength(600);
    expect(jobs[100].id).toBe('bulk-100');
    expect(await queue.count()).toBe(600);
    const again = await queue.addBulk([
      { name: 'b', data: 'x', opts: { jobId: 'bulk-0' } },
      { name: 'b', data: 'y' },
    ]);
    expect(again[0].id).toBe('bulk-0');
    expect(await queue.count()).toBe(601);
    expect((await queue.getJob('bulk-0'))!.data).toBe(0);
  });

  it('addBulk adds all or nothing across its calls', async () => {
    // Data over the module's max-payload (1 MiB): the second call is refused, the first undone.
    const jobs = Array.from({ length: 300 }, (_, i) => ({ name: 'b', data: i === 299 ? 'x'.repeat(1100000) : i }));
    await expect(queue.addBulk(jobs)).rejects.toThrow(/^EMQ/);
    expect(await queue.count()).toBe(0);
  });

  it('changePriority moves a waiting job', async () => {
    const a = await queue.add('a', {});
    await queue.add('b', {}, { priority: 2 });
    await a.changePriority({ priority: 5 });
    expect(await a.getState()).toBe('prioritized');
    expect((await queue.getJob(a.id!))!.priority).toBe(5);
    await a.changePriority({ priority: 0 });
    expect(await a.getState()).toBe('waiting');
  });

  it('custom job ids: one job per id, found by that id', async () => {
    const a = await queue.add('x', { n: 1 }, { jobId: 'order-42' });
    const b = await queue.add('x', { n: 2 }, { jobId: 'order-42' });
    expect(a.id).toBe('order-42');
    expect(b.id).toBe('order-42');
    expect(await queue.count()).toBe(1);
    const got = await queue.getJob('order-42');
    expect(got!.id).toBe('order-42');
    expect(got!.data).toEqual({ n: 1 });
    const done = new Promise<string>(ok => {
      track(new Worker(name, async (job: Job) => ok(job.id!), { connection }));
    });
    expect(await done).toBe('order-42');
    await until(async () => (await queue.getJobState('order-42')) === 'completed');
    expect(await queue.getCompleted()).toEqual([expect.objectContaining({ id: 'order-42' })]);
  });
});

describe('workers', () => {
  it('getWorkers finds running workers, named or not (bull-board shows them)', async () => {
    expect(await queue.getWorkersCount()).toBe(0);
    const w1 = track(new Worker(name, async () => 1, { connection }));
    const w2 = track(new Worker(name, async () => 1, { connection, name: 'mailer' }));
    await Promise.all([w1.waitUntilReady(), w2.waitUntilReady()]);
    await until(async () => (await queue.getWorkersCount()) === 2);
    const raw = (await queue.getWorkers()).map(w => w.rawname).sort();
    expect(raw[1]).toMatch(/:w:mailer$/);
    await w2.close();
    await until(async () => (await queue.getWorkersCount()) === 1);
  });

  it("a named worker's name is in each job's row (BY): nothing kept beside, and a later worker without a name leaves it", async () => {
    const admin = new Redis(connection);
    try {
      const jobs = 3000;
      const tricky = 'named-then-not';
      await queue.addBulk(
        Array.from({ length: jobs }, (_, i) => ({ name: 'n', data: { i }, opts: { removeOnComplete: true } })),
      );
      // Names an adapter kept beside the rows on a module without BY: dropped by the first
      // named worker, as they are never read again.
      const pb = `emq:{${escapeQueueName(`bull:${name}`)}}:b:pb`;
      await admin.hset(pb, 'JOB0000000001a', 'old-worker');
      let done = 0;
      let by: string | undefined;
      const named = track(
        new Worker(
          name,
          async (job: Job) => {
            if (job.id === tricky) {
              throw new Error('no');
            }
            done++;
            by ??= job.processedBy;
          },
          { connection, name: 'mailer', concurrency: 50 },
        ),
      );
      await until(async () => done === jobs && (await queue.count()) === 0);
      expect(by).toBe('mailer');
      expect(await admin.exists(pb)).toBe(0);
      // A job the named worker failed, retried and run by a worker without a name: as in
      // BullMQ, it shows the last name a worker gave, to its processor and after.
      await queue.add('kept', {}, { jobId: tricky });
      await until(async () => (await queue.getJobState(tricky)) === 'failed');
      expect((await queue.getJob(tricky))?.processedBy).toBe('mailer');
      await named.close();
      let seen: string | undefined = 'none';
      track(new Worker(name, async (job: Job) => void (seen = job.processedBy), { connection }));
      await (await queue.getJob(tricky))!.retry();
      await until(async () => (await queue.getJobState(tricky)) === 'completed');
      expect(seen).toBe('mailer');
      expect((await queue.getJob(tricky))?.processedBy).toBe('mailer');
    } finally {
      admin.disconnect();
    }
  });

  it('a worker of concurrency 500 keeps its leases (EXTENDS in calls of 250 pairs)', async () => {
    let release!: () => void;
    const gate = new Promise<void>(ok => (release = ok));
    let running = 0;
    const worker = track(
      new Worker(
        name,
        async () => {
          running++;
          await gate;
        },
        { connection, concurrency: 500, lockDuration: 1000, lockRenewTime: 300 },
      ),
    );
    await queue.addBulk(Array.from({ length: 600 }, (_, i) => ({ name: 'j', data: i })));
    await until(() => running === 500, 20000);
    const failures: string[] = [];
    worker.on('error', err => failures.push(String(err)));
    // BullMQ's Worker emits it; its typed listener map does not declare it.
    (worker as unknown as EventEmitter).on('lockRenewalFailed', (ids: string[]) =>
      failures.push(`renewal failed: ${ids.length}`),
    );
    // Three lease lengths: without renewals upkeep would reclaim them all.
    await sleep(3000);
    expect(failures).toEqual([]);
    expect(await queue.getActiveCount()).toBe(500);
    expect(await queue.getJobCountByTypes('wait')).toBe(100);
    release();
    await until(async () => (await queue.getCompletedCount()) === 600, 20000);
  }, 60000);

  it('a waiting worker (CLAIM … BLOCK) finishes a job with a custom id', async () => {
    const events = track(new QueueEvents(name, { connection }));
    await events.waitUntilReady();
    const worker = track(new Worker(name, async (job: Job) => `done ${job.id}`, { connection }));
    await worker.waitUntilReady();
    await sleep(100);
    const job = await queue.add('c', {}, { jobId: 'welcome-carol' });
    expect(await job.waitUntilFinished(events)).toBe('done welcome-carol');
    expect(await queue.getJobState('welcome-carol')).toBe('completed');
  });

  it('extendLock: 1 while the job is held, 0 once it is finished', async () => {
    const worker = track(new Worker(name, null, { connection, autorun: false }));
    await queue.add('held', {});
    const job = (await worker.getNextJob('holder'))!;
    expect(await job.extendLock('holder', 5000)).toBe(1);
    await job.moveToCompleted('ok', 'holder', false);
    expect(await job.extendLock('holder', 5000)).toBe(0);
  });

  it("only BullMQ's token for a job acts as its holder, however the job was claimed", async () => {
    const worker = track(new Worker(name, null, { connection, autorun: false }));
    // The first fetch finds nothing and marks the worker drained, so the second waits inside
    // the server (CLAIM … BLOCK, under a token of the backend's) and a finish fetches the
    // next job with that token: neither is the token BullMQ gave the job.
    expect(await worker.getNextJob('t1')).toBeUndefined();
    const waiting = worker.getNextJob('t1');
    await sleep(50);
    await queue.addBulk([
      { name: 'first', data: {} },
      { name: 'second', data: {} },
    ]);
    const first = (await waiting)!;
    expect(first.name).toBe('first');
    expect(await first.extendLock('t1', 5000)).toBe(1);
    expect(await first.extendLock('another', 5000)).toBe(0);
    await expect(first.moveToCompleted('ok', 'another', false)).rejects.toThrow(
      `Lock mismatch for job ${first.id}. Cmd moveToFinished from active`,
    );
    expect(await first.getState()).toBe('active');
    const [data, id] = (await first.moveToCompleted('ok', 't1', true)) as [{ name: string }, string];
    expect(data.name).toBe('second');
    const second = await queue.getJob(id);
    expect(await second!.extendLock('another', 5000)).toBe(0);
    expect(await second!.extendLock('t1', 5000)).toBe(1);
    // BullMQ's "0" skips its lock check: the job this process holds is failed.
    await second!.moveToFailed(new Error('no'), '0', false);
    expect(await second!.getState()).toBe('failed');
  });

  it('finish-and-fetch calls of several workers of one queue, in one turn, go as one call', async () => {
    const a = track(new Worker(name, null, { connection, autorun: false }));
    const b = track(new Worker(name, null, { connection, autorun: false }));
    // Another lease is another argument of the call: that worker's finish goes apart.
    const d = track(new Worker(name, null, { connection, autorun: false, lockDuration: 60000 }));
    const otherName = `${name}-o`;
    const other = track(new Queue(otherName, { connection }));
    const c = track(new Worker(otherName, null, { connection, autorun: false }));
    await queue.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: `j${i}`, data: {} })));
    await other.addBulk([
      { name: 'o0', data: {} },
      { name: 'o1', data: {} },
    ]);
    const ja = (await a.getNextJob('ta'))!;
    const jb = (await b.getNextJob('tb'))!;
    const jd = (await d.getNextJob('td'))!;
    const jc = (await c.getNextJob('tc'))!;
    const raw = new Redis(connection);
    const calls = async () => {
      const info = await raw.info('commandstats');
      return ['completesnext', 'completenext'].map(v =>
        Number(new RegExp(`cmdstat_tra\\.${v}:calls=(\\d+)`).exec(info)?.[1] ?? 0),
      );
    };
    try {
      const [many, one] = await calls();
      const [na, nb, nd, nc] = (await Promise.all([
        ja.moveToCompleted('ra', 'ta', true),
        jb.moveToCompleted('rb', 'tb', true),
        jd.moveToCompleted('rd', 'td', true),
        jc.moveToCompleted('rc', 'tc', true),
      ])) as [{ name: string }, string][];
      // The two workers of one queue and one lease share a call; the other lease's finish and
      // the other queue's have their own.
      expect(await calls()).toEqual([many + 1, one + 2]);
      expect([na[0].name, nb[0].name, nd[0].name, nc[0].name]).toEqual(['j3', 'j4', 'j5', 'o1']);
      for (const j of [ja, jb, jd, jc]) {
        expect(await j.getState()).toBe('completed');
      }
      // Each fetched job is held by its own worker's token, and by no other.
      const fa = (await queue.getJob(na[1]))!;
      const fb = (await queue.getJob(nb[1]))!;
      expect(await fa.extendLock('tb', 5000)).toBe(0);
      expect(await fb.extendLock('ta', 5000)).toBe(0);
      expect(await fa.extendLock('ta', 5000)).toBe(1);
      expect(await fb.extendLock('tb', 5000)).toBe(1);
    } finally {
      raw.disconnect();
      await other.obliterate({ force: true });
    }
  });

  it('finish-and-fetch calls of one turn go as one call, each answered for itself', async () => {
    const worker = track(new Worker(name, null, { connection, autorun: false }));
    await queue.addBulk(Array.from({ length: 9 }, (_, i) => ({ name: `j${i}`, data: {} })));
    const held: Job[] = [];
    for (let i = 0; i < 4; i++) {
      held.push((await worker.getNextJob(`t${i}`))!);
    }
    const raw = new Redis(connection);
    const calls = async () =>
      Number(/cmdstat_tra\.completesnext:calls=(\d+)/.exec(await raw.info('commandstats'))?.[1] ?? 0);
    try {
      const before = await calls();
      // Three finishes by the holders' tokens and one by a token that is not its holder's.
      const got = await Promise.allSettled([
        held[0].moveToCompleted('r0', 't0', true),
        held[1].moveToCompleted('r1', 'wrong', true),
        held[2].moveToCompleted('r2', 't2', true),
        held[3].moveToCompleted('r3', 't3', true),
      ]);
      expect(await calls()).toBe(before + 1);
      expect(got[1].status).toBe('rejected');
      expect(String((got[1] as PromiseRejectedResult).reason?.message)).toContain(
        `Lock mismatch for job ${held[1].id}. Cmd moveToFinished from active`,
      );
      const next = [got[0], got[2], got[3]].map(
        g => (g as PromiseFulfilledResult<unknown>).value as [{ name: string }, string],
      );
      expect(next.map(([data]) => data.name)).toEqual(['j4', 'j5', 'j6']);
      for (const [i, job] of [
        [0, held[0]],
        [2, held[2]],
        [3, held[3]],
      ] as const) {
        expect(await job.getState()).toBe('completed');
        expect((await queue.getJob(job.id!))!.returnvalue).toBe(`r${i}`);
      }
      expect(await held[1].getState()).toBe('active');
      // Each fetched job is held by its caller's token, and by no other.
      const fetched = await queue.getJob(next[1][1]);
      expect(await fetched!.extendLock('t2', 5000)).toBe(1);
      expect(await fetched!.extendLock('t0', 5000)).toBe(0);

      // The same job finished twice in one turn: the call is refused whole (an id given
      // twice), and each finish is sent alone: the first completes it, the second is the
      // holder's repeat, answered as done.
      const twice = await Promise.all([
        held[1].moveToCompleted('again', 't1', true),
        held[1].moveToCompleted('again', 't1', true),
      ]);
      expect(await held[1].getState()).toBe('completed');
      expect(twice.filter(r => Array.isArray(r) && r[0]).length).toBe(2);
    } finally {
      await raw.quit();
    }
  });

  it('runs jobs at the worker concurrency, no more', async () => {
    let running = 0;
    let most = 0;
    let done = 0;
    track(
      new Worker(
        name,
        async () => {
          running++;
          most = Math.max(most, running);
          await sleep(50);
          running--;
          done++;
        },
        { connection, concurrency: 4 },
      ),
    );
    await queue.addBulk(Array.from({ length: 16 }, (_, i) => ({ name: 'j', data: i })));
    await until(() => done === 16);
    expect(most).toBe(4);
  });

  it('retries with backoff until an attempt succeeds', async () => {
    const seen: number[] = [];
    track(
      new Worker(
        name,
        async (job: Job) => {
          seen.push(job.attemptsMade);
          if (job.attemptsMade < 2) {
            throw new Error('not yet');
          }
          return 'ok';
        },
        { connection },
      ),
    );
    const job = await queue.add('r', {}, { attempts: 3, backoff: { type: 'exponential', delay: 50 } });
    await until(async () => (await queue.getJobState(job.id!)) === 'completed');
    expect(seen).toEqual([0, 1, 2]);
    const got = await queue.getJob(job.id!);
    expect(got!.attemptsMade).toBe(3);
    expect(got!.returnvalue).toBe('ok');
  });

  it('fails for good after the last attempt, or at once on UnrecoverableError', async () => {
    track(
      new Worker(
        name,
        async (job: Job) => {
          throw job.name === 'stop' ? new UnrecoverableError('no') : new Error('boom');
        },
        { connection },
      ),
    );
    const a = await queue.add('fail', {}, { attempts: 2 });
    const b = await queue.add('stop', {}, { attempts: 5 });
    await until(async () => (await queue.getFailedCount()) === 2);
    const ga = await queue.getJob(a.id!);
    const gb = await queue.getJob(b.id!);
    expect(ga!.attemptsMade).toBe(2);
    expect(ga!.failedReason).toBe('boom');
    expect(gb!.attemptsMade).toBe(1);
    expect(gb!.failedReason).toBe('no');
  });

  it('recovers a job whose worker died, with no sweeper: upkeep hands it to the next worker', async () => {
    const job = await queue.add('s', { v: 1 });
    // A worker that claims the job and dies: its lease of 300 ms is never renewed.
    const raw = new Redis(connection);
    const q = createTrafikeyBackend(name, { connection });
    const keys = ['wait', 'prio', 'active', 'delayed', 'meta', 'events'].map(r => q.key(r));
    const claimed = (await raw.call('EMQ.CLAIM', 6, ...keys, 'dead-worker', 300)) as string[][];
    raw.disconnect();
    await q.close();
    expect(claimed[0][0]).toBe(job.id);
    expect(await queue.getJobState(job.id!)).toBe('active');
    const events = track(new QueueEvents(name, { connection }));
    await events.waitUntilReady();
    const stalled = new Promise<string>(ok => events.on('stalled', ({ jobId }) => ok(jobId)));
    const done = new Promise<Job>(ok => {
      track(new Worker(name, async (j: Job) => ok(j), { connection }));
    });
    expect(await stalled).toBe(job.id);
    const again = await done;
    expect(again.id).toBe(job.id);
    expect(again.stalledCounter).toBe(1);
  });

  it("a worker's stalled check reports a stall behind more events than one read takes", async () => {
    // A stall long past, then 1 200 `added` events, then the stall: the check reads the stream
    // in pages of 500, and a worker's first check looks back one lease, not to the start.
    const raw = new Redis(connection);
    const q = createTrafikeyBackend(name, { connection });
    await raw.xadd(q.key('events'), '1000-0', 'event', 'stalled', 'id', mintJobId());
    await queue.addBulk(Array.from({ length: 1200 }, (_, i) => ({ name: 'pad', data: { i } })));
    try {
      const keys = ['wait', 'prio', 'active', 'delayed', 'meta', 'events'].map(r => q.key(r));
      const claimed = (await raw.call('EMQ.CLAIM', 6, ...keys, 'dead-worker', 200)) as string[][];
      await until(async () => (await queue.getJobState(claimed[0][0])) === 'waiting');
      expect(await q.moveStalledJobsToWait()).toEqual([claimed[0][0]]);
      // The next check starts after what this one read, and takes its turn only once per interval.
      await raw.del(q.key('b:stalled-check'));
      expect(await q.moveStalledJobsToWait()).toEqual([]);
    } finally {
      raw.disconnect();
      await q.close();
    }
  });

  it('client decisions on fail: a custom backoff, the stack, retry() keeping the counters', async () => {
    const seen: number[] = [];
    track(
      new Worker(
        name,
        async (job: Job) => {
          seen.push(Date.now());
          if (job.attemptsMade < 2 || job.data.fail) {
            throw new Error(`try ${job.attemptsMade}`);
          }
          return 'ok';
        },
        { connection, settings: { backoffStrategy: () => 150 } },
      ),
    );
    const job = await queue.add('c', {}, { attempts: 3, backoff: { type: 'custom' } });
    await until(async () => (await job.getState()) === 'completed');
    expect(seen[2] - seen[1]).toBeGreaterThanOrEqual(140);
    expect((await queue.getJob(job.id!))!.attemptsMade).toBe(3);
    const bad = await queue.add(
      'c',
      { fail: true },
      { attempts: 2, backoff: { type: 'fixed', delay: 10, jitter: 0.5 } },
    );
    await until(async () => (await bad.getState()) === 'failed');
    const failed = (await queue.getJob(bad.id!))!;
    expect(failed.attemptsMade).toBe(2);
    expect((failed.stacktrace ?? []).join('\n')).toContain('try 1');
    await failed.retry('failed');
    await until(async () => (await queue.getJob(bad.id!))!.attemptsMade >= 3);
  });

  it('a failure that delays the job hands over the next one when asked (fetchNext)', async () => {
    await queue.add('a', {}, { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } });
    await queue.add('b', {});
    await queue.add('c', {});
    const worker = track(new Worker(name, null, { connection, autorun: false }));
    const a = (await worker.getNextJob('t1'))!;
    const next = (await a.moveToFailed(new Error('x'), 't1', true)) as [{ name: string } | undefined, string];
    expect(next[0]?.name).toBe('b');
    expect(await a.getState()).toBe('delayed');
    expect(await queue.getJobState(next[1])).toBe('active');
  });

  it('LIFO jobs retry at the front of wait: after a failure with attempts left, and by retry()', async () => {
    const worker = track(new Worker(name, null, { connection }));
    const token = randomUUID();
    const next = async () => (await worker.getNextJob(token))!;
    await queue.add('l', {}, { lifo: true, attempts: 2 });
    await queue.add('a', {});
    const first = await next();
    expect(first.name).toBe('l');
    // Attempts left and no backoff: ready again at once, ahead of the job that waited.
    await first.moveToFailed(new Error('once'), token);
    const again = await next();
    expect(again.name).toBe('l');
    await again.moveToFailed(new Error('twice'), token);
    expect(await again.getState()).toBe('failed');
    // retry() of the failed LIFO job: ahead of 'a' again.
    await (await queue.getJob(again.id!))!.retry('failed');
    const third = await next();
    expect(third.name).toBe('l');
    await third.moveToCompleted('ok', token, false);
    expect((await next()).name).toBe('a');
  });

  it('pause and resume', async () => {
    await queue.pause();
    expect(await queue.isPaused()).toBe(true);
    let ran = 0;
    track(new Worker(name, async () => void ran++, { connection }));
    await queue.add('p', {});
    await sleep(300);
    expect(ran).toBe(0);
    await queue.resume();
    expect(await queue.isPaused()).toBe(false);
    await until(() => ran === 1);
  });
});

describe('QueueEvents', () => {
  it('waitUntilFinished resolves with the result, rejects with the failure', async () => {
    const events = track(new QueueEvents(name, { connection }));
    await events.waitUntilReady();
    track(
      new Worker(
        name,
        async (job: Job) => {
          if (job.data.fail) {
            throw new Error('bad input');
          }
          return { sum: job.data.a + job.data.b };
        },
        { connection },
      ),
    );
    const ok = await queue.add('add', { a: 2, b: 3 });
    const bad = await queue.add('add', { fail: true });
    expect(await ok.waitUntilFinished(events)).toEqual({ sum: 5 });
    await expect(bad.waitUntilFinished(events)).rejects.toThrow('bad input');
  });

  it('reports added, active, progress and completed with BullMQ names', async () => {
    const events = track(new QueueEvents(name, { connection }));
    await events.waitUntilReady();
    const seen: string[] = [];
    for (const e of ['added', 'waiting', 'active', 'progress', 'completed'] as const) {
      events.on(e, () => void seen.push(e));
    }
    const progress = new Promise<unknown>(ok => events.on('progress', ({ data }) => ok(data)));
    track(
      new Worker(
        name,
        async (job: Job) => {
          await job.updateProgress({ step: 1 });
          return 1;
        },
        { connection },
      ),
    );
    await queue.add('e', {});
    expect(await progress).toEqual({ step: 1 });
    await until(() => seen.includes('completed'));
    expect(seen.slice(0, 3)).toEqual(['added', 'waiting', 'active']);
  });

  it('reads from the newest event at ready, however late its first read comes', async () => {
    const events = track(new QueueEvents(name, { connection, autorun: false }));
    await events.waitUntilReady();
    // Added before the first read: `$` then would mean after this event.
    await queue.add('early', {});
    const added = new Promise<string>(ok => events.on('added', ({ name }) => ok(name)));
    void events.run();
    expect(await added).toBe('early');
  });

  it('a QueueEventsProducer trims the stream to about maxEvents', async () => {
    const producer = track(new QueueEventsProducer(name, { connection }));
    for (let i = 0; i < 600; i++) {
      await producer.publishEvent({ eventName: 'custom', n: i }, 50);
    }
    const raw = new Redis(connection);
    const q = createTrafikeyBackend(name, { connection });
    try {
      // MAXLEN ~ trims whole nodes of the stream (100 entries each by default).
      expect(await raw.xlen(q.key('events'))).toBeLessThan(300);
    } finally {
      raw.disconnect();
      await q.close();
    }
  });

  it('a late reader sees each progress value and the result, though the row is gone', async () => {
    track(
      new Worker(
        name,
        async (job: Job) => {
          for (const step of [1, 2, 3]) {
            await job.updateProgress(step);
          }
          return 'done';
        },
        { connection },
      ),
    );
    await queue.add('e', {}, { removeOnComplete: true });
    await until(async () => (await queue.getWaitingCount()) + (await queue.getActiveCount()) === 0);
    const events = track(new QueueEvents(name, { connection, lastEventId: '0-0' }));
    const steps: unknown[] = [];
    events.on('progress', ({ data }) => void steps.push(data));
    const result = new Promise<unknown>(ok => events.on('completed', ({ returnvalue }) => ok(returnvalue)));
    expect(await result).toBe('done');
    expect(steps).toEqual([1, 2, 3]);
  });
});

describe('getters and administration', () => {
  it('counts and lists jobs by state', async () => {
    track(
      new Worker(
        name,
        async (job: Job) => {
          if (job.data.fail) throw new Error('x');
        },
        { connection },
      ),
    );
    await queue.add('ok', {});
    await queue.add('bad', { fail: true });
    await until(async () => (await queue.getJobCountByTypes('completed', 'failed')) === 2);
    await queue.add('later', {}, { delay: 60000 });
    const counts = await queue.getJobCounts();
    expect(counts).toMatchObject({ completed: 1, failed: 1, delayed: 1, active: 0, waiting: 0 });
    expect((await queue.getCompleted()).map(j => j.name)).toEqual(['ok']);
    expect((await queue.getFailed()).map(j => j.name)).toEqual(['bad']);
    expect((await queue.getDelayed()).map(j => j.name)).toEqual(['later']);
  });

  it('remove, clean, drain and obliterate', async () => {
    const a = await queue.add('a', {});
    await queue.add('b', {});
    await queue.add('c', {}, { delay: 60000 });
    await a.remove();
    expect(await queue.getJob(a.id!)).toBeUndefined();
    expect(await queue.count()).toBe(2);
    await queue.drain();
    expect(await queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 1 });
    await queue.drain(true);
    expect(await queue.count()).toBe(0);

    let n = 0;
    track(new Worker(name, async () => void n++, { connection }));
    await queue.addBulk([
      { name: 'x', data: 1 },
      { name: 'y', data: 2 },
    ]);
    await until(() => n === 2);
    await until(async () => (await queue.getCompletedCount()) === 2);
    const cleaned = await queue.clean(0, 10, 'completed');
    expect(cleaned).toHaveLength(2);
    expect(await queue.getCompletedCount()).toBe(0);

    await queue.add('z', {}, { delay: 60000 });
    await queue.obliterate({ force: true });
    expect(await queue.getJobCounts()).toMatchObject({ delayed: 0, waiting: 0, completed: 0 });
  });

  it('clean of waiting jobs goes by the time getJob shows, whoever made the job', async () => {
    const mine = await queue.add('mine', {});
    // A job another client made: a row without the adapter's options, timed by its creation.
    const raw = new Redis(connection);
    const q = createTrafikeyBackend(name, { connection });
    try {
      const theirs = mintJobId();
      expect(
        await raw.call(
          'EMQ.ENQUEUE',
          4,
          q.key(`job:${theirs}`),
          q.key('wait'),
          q.key('prio'),
          q.key('events'),
          'theirs',
          '{}',
        ),
      ).toBe(1);
      expect((await queue.getJob(theirs))!.timestamp).toBeGreaterThan(0);
      expect(await queue.clean(60_000, 10, 'wait')).toEqual([]);
      expect((await queue.clean(0, 10, 'wait')).sort()).toEqual([mine.id, theirs].sort());
      expect(await queue.getWaitingCount()).toBe(0);
    } finally {
      raw.disconnect();
      await q.close();
    }
  });

  it("obliterate leaves no key of the queue behind, the adapter's own included", async () => {
    const worker = new Worker(name, async (job: Job) => void (await job.log('ran')), { connection, name: 'w1' });
    await queue.add('a', {});
    await until(async () => (await queue.getCompletedCount()) === 1);
    await worker.close();
    const raw = new Redis(connection);
    const q = createTrafikeyBackend(name, { connection });
    try {
      const pattern = q.key('*');
      expect((await raw.keys(pattern)).length).toBeGreaterThan(0);
      await queue.obliterate({ force: true });
      expect(await raw.keys(pattern)).toEqual([]);
    } finally {
      raw.disconnect();
      await q.close();
    }
  });

  it('promoteJobs moves a batch of count a call and says whether more are left', async () => {
    for (const n of ['a', 'b', 'c']) {
      await queue.add(n, {}, { delay: 60_000 });
    }
    const q = createTrafikeyBackend(name, { connection });
    try {
      expect(await q.promoteJobs(2)).toBe(1);
      expect(await queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 2, delayed: 1 });
      expect(await q.promoteJobs(2)).toBe(0);
      expect(await queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 3, delayed: 0 });
    } finally {
      await q.close();
    }
  });

  it('logs and progress on a job nobody holds', async () => {
    const job = await queue.add('l', {});
    await job.log('first');
    await job.updateProgress(40);
    const { logs, count } = await queue.getJobLogs(job.id!);
    expect(logs).toEqual(['first']);
    expect(count).toBe(1);
    expect((await queue.getJob(job.id!))!.progress).toBe(40);
  });
});

describe('unsupported features say so', () => {
  it('flows', async () => {
    // A queue without schedulers reads none (bull-board reads them on every refresh).
    expect(await queue.getJobSchedulersCount()).toBe(0);
    expect(await queue.getJobSchedulers()).toEqual([]);
    const flow = track(new FlowProducer({ connection }));
    await expect(flow.add({ name: 'p', queueName: name, children: [{ name: 'c', queueName: name }] })).rejects.toThrow(
      /flows.*not supported/,
    );
  });
});
