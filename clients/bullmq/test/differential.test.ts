// The same BullMQ calls on BullMQ's own Redis store (a plain Valkey) and on trafikey: what a
// user sees must agree.
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  withBackend,
  Queue as BullQueue,
  Worker as BullWorker,
  QueueEvents as BullQueueEvents,
  QueueEventsProducer as BullQueueEventsProducer,
  UnrecoverableError,
  DelayedError,
  WaitingError,
  type Job,
} from 'bullmq';
import { Redis } from 'ioredis';
import { closeTracked, sleep, track, until } from './helpers.js';
import { freePort, install, modulePath, startServer, stopServer } from './server.js';
import { withTrafikey } from '../src/index.js';

const port = inject('port');
const ours = { host: '127.0.0.1', port };
const theirs = { host: '127.0.0.1', port: inject('plainPort') };
const Trafikey = withTrafikey(withBackend);

type Classes = {
  Queue: typeof BullQueue;
  Worker: typeof BullWorker;
  QueueEvents: typeof BullQueueEvents;
  QueueEventsProducer: typeof BullQueueEventsProducer;
};
const stores: Record<'bullmq' | 'trafikey', { classes: Classes; connection: typeof ours }> = {
  bullmq: {
    classes: {
      Queue: BullQueue,
      Worker: BullWorker,
      QueueEvents: BullQueueEvents,
      QueueEventsProducer: BullQueueEventsProducer,
    },
    connection: theirs,
  },
  trafikey: { classes: Trafikey as unknown as Classes, connection: ours },
};

let name: string;
beforeEach(() => {
  name = `diff-${randomUUID()}`;
});
afterEach(closeTracked);

/** What a scenario runs on: a store's classes, a queue of its own and a worker not started. */
type Store = { c: Classes; connection: typeof ours; q: BullQueue; w: BullWorker };

/** Runs `scenario` on both stores, each with the test's queue name, and returns both results. */
async function both<T>(scenario: (s: Store) => Promise<T>): Promise<{ bullmq: T; trafikey: T }> {
  const out: Record<string, T> = {};
  for (const [store, { classes, connection }] of Object.entries(stores)) {
    const q = track(new classes.Queue(name, { connection }));
    const w = track(new classes.Worker(name, null, { connection, autorun: false }));
    await q.waitUntilReady();
    try {
      out[store] = await scenario({ c: classes, connection, q, w });
    } finally {
      await q.obliterate({ force: true }).catch(() => undefined);
    }
  }
  return out as { bullmq: T; trafikey: T };
}

/**
 * Every event a QueueEvents emits while `act` runs, as [name, args], in order: the delay of
 * `delayed` (a time) as the seconds from the event to it, and a `drained` event's id left out.
 * Ends once the `waiting` of job `last` is seen. The module's own events that BullMQ has no
 * name for (`priority`) pass through the backend as they are, and are left out here.
 */
async function eventsOf(
  { c, connection, q, w }: Store,
  act: (q: BullQueue, w: BullWorker) => Promise<void>,
): Promise<[string, Record<string, unknown>][]> {
  const qe = track(new c.QueueEvents(name, { connection }));
  await qe.waitUntilReady();
  const seen: [string, Record<string, unknown>][] = [];
  const emit = qe.emit.bind(qe) as (event: string, ...args: unknown[]) => boolean;
  (qe as unknown as { emit: typeof emit }).emit = (event, ...args) => {
    if (!['error', 'priority'].includes(event) && !event.includes(':')) {
      const a = event === 'drained' ? {} : { ...(args[0] as Record<string, unknown>) };
      if (typeof a.delay === 'number') {
        // From the event's own time (its stream id), not from when it was read: a backoff of
        // a few ms is over or not by then, as the machine goes.
        a.delay = `in ${Math.round((a.delay - Number(String(args[1]).split('-')[0])) / 1000)} s`;
      }
      seen.push([event, a]);
    }
    return emit(event, ...args);
  };
  // A read already waiting: the first event is not missed.
  await sleep(50);
  await act(q, w);
  await q.add('last', {}, { jobId: 'last' });
  await until(() => seen.some(([e, a]) => e === 'waiting' && a.jobId === 'last'));
  return seen;
}

/** Takes the next job for `token`, waiting for one to be ready (a retry's backoff). */
async function take(w: BullWorker, token: string): Promise<Job> {
  let j: Job | undefined;
  await until(async () => !!(j = await w.getNextJob(token, { block: false })), 5000);
  return j!;
}

describe('QueueEvents', () => {
  it("tells a job's life in the same events, with the same facts, in the same order", async () => {
    const r = await both(s =>
      eventsOf(s, async (q, w) => {
        await q.add('a', { v: 1 }, { jobId: 'a' });
        await q.add('c', {}, { jobId: 'c', delay: 60000 });
        await q.add('p', {}, { jobId: 'p', priority: 2 });
        await q.add('a', {}, { jobId: 'a' });
        await (await q.getJob('p'))!.changePriority({ priority: 1 });
        await (await q.getJob('c'))!.promote();
        const a = await take(w, 't1');
        await a.updateProgress(50);
        await a.moveToCompleted({ r: 1 }, 't1', false);
        for (const t of ['t2', 't3']) {
          await (await take(w, t)).moveToCompleted(t, t, false);
        }
        await q.add('b', {}, { jobId: 'b', attempts: 3, backoff: { type: 'fixed', delay: 10 } });
        for (const t of ['t4', 't5', 't6']) {
          await (await take(w, t)).moveToFailed(new Error(t), t, false);
        }
        await (await q.getJob('b'))!.retry('failed');
        await q.pause();
        await q.resume();
        await q.add('p5', {}, { jobId: 'p5', priority: 5 });
        await (await q.getJob('p5'))!.remove();
        await q.add('d', {}, { jobId: 'd', delay: 50000 });
        await (await q.getJob('d'))!.changeDelay(40000);
        await (await q.getJob('d'))!.remove();
        await q.add('u', {}, { jobId: 'u' });
        await (await q.getJob('u'))!.updateProgress('half');
        for (const t of ['t7', 't8']) {
          await (await take(w, t)).moveToCompleted('done', t, false);
        }
        await q.clean(0, 10, 'completed');
        await q.add('w', {}, { jobId: 'w' });
        await (await q.getJob('w'))!.remove();
        await q.add('x', {}, { jobId: 'x', deduplication: { id: 'k' } });
        await q.add('y', {}, { jobId: 'y', deduplication: { id: 'k' } });
        await q.add('r1', {}, { jobId: 'r1', delay: 30000, deduplication: { id: 'r', replace: true, ttl: 60000 } });
        await q.add('r2', {}, { jobId: 'r2', delay: 30000, deduplication: { id: 'r', replace: true, ttl: 60000 } });
      }),
    );
    expect(r.bullmq.map(([e]) => e)).toContain('retries-exhausted');
    expect(r.bullmq.filter(([e]) => e === 'delayed').map(([, a]) => a.delay)).toEqual([
      'in 60 s',
      'in 0 s',
      'in 0 s',
      'in 50 s',
      'in 40 s',
      'in 30 s',
      'in 30 s',
    ]);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('jobs', () => {
  it('show the same fields at each step of their lives', async () => {
    const r = await both(async ({ q, w }) => {
      const views: unknown[] = [];
      const look = async (step: string) => {
        for (const id of ['a', 'b', 'c']) {
          const j = await q.getJob(id);
          if (!j) {
            views.push([step, id, null]);
            continue;
          }
          const v = j.asJSON() as unknown as Record<string, unknown>;
          for (const t of ['timestamp', 'processedOn', 'finishedOn', 'id']) {
            v[t] = typeof v[t];
          }
          v.state = await j.getState();
          views.push([step, id, v]);
        }
      };
      await q.add('a', { x: 1 }, { jobId: 'a', attempts: 2, priority: 3 });
      await q.add('b', { y: 'z' }, { jobId: 'b', delay: 60000, lifo: true });
      await q.add('c', [1, 2], {
        jobId: 'c',
        delay: 60000,
        attempts: 3,
        backoff: { type: 'exponential', delay: 5 },
        removeOnComplete: 5,
      });
      await look('added');
      const a = await take(w, 't1');
      await look('taken');
      await a.updateProgress({ p: 1 });
      await a.moveToFailed(new Error('first'), 't1', false);
      await look('failed once');
      const a2 = await take(w, 't2');
      await a2.moveToFailed(new Error('second'), 't2', false);
      await look('failed');
      await a2.retry('failed');
      await look('retried');
      await (await q.getJob('c'))!.promote();
      const c = await take(w, 't3');
      await c.moveToCompleted({ ok: true }, 't3', false);
      await look('completed');
      await (await q.getJob('b'))!.promote();
      await look('promoted');
      await c.retry('completed');
      await look('completed job retried');
      const b = await take(w, 't4');
      await b.updateProgress(7);
      await b.moveToFailed(new Error('b'), 't4', false);
      await look('b failed');
      await q.retryJobs({ state: 'failed' });
      await look('retryJobs');
      return views;
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('options', () => {
  it('a job given no options reads back with the options BullMQ gives it', async () => {
    const r = await both(async ({ q }) => {
      const one = await q.add('plain', {});
      const [bulk] = await q.addBulk([{ name: 'plain bulk', data: {} }]);
      const some = await q.add('some', {}, { attempts: 1 });
      return Promise.all(
        [one, bulk, some].map(async j => [
          j.opts,
          (await q.getJob(j.id!))!.opts,
          (await q.getJob(j.id!))!.asJSON().opts,
        ]),
      );
    });
    // (toEqual passes over the keys BullMQ's Job leaves undefined.)
    expect(r.bullmq).toEqual([
      [{ attempts: 0 }, { attempts: 0 }, { attempts: 0 }],
      [{ attempts: 0 }, { attempts: 0 }, { attempts: 0 }],
      [{ attempts: 1 }, { attempts: 1 }, { attempts: 1 }],
    ]);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('getters', () => {
  it('list the same page of each state in either order, and count the same', async () => {
    const states = ['waiting', 'active', 'prioritized', 'delayed', 'completed', 'failed'] as const;
    const r = await both(async ({ q, w }) => {
      for (const n of ['a', 'b', 'c', 'd', 'e', 'f']) {
        await q.add(n, {});
      }
      await q.add('p3', {}, { priority: 3 });
      await q.add('p1', {}, { priority: 1 });
      await q.add('p2', {}, { priority: 2 });
      for (const [n, delay] of [
        ['d2', 70000],
        ['d1', 60000],
        ['d3', 80000],
      ] as const) {
        await q.add(n, {}, { delay });
      }
      const held: Record<string, Job> = {};
      for (const t of ['t1', 't2', 't3', 't4', 't5', 't6']) {
        const job = (await w.getNextJob(t))!;
        held[job.name] = job;
        // Apart in time: a lease's deadline orders trafikey's active set, a finish time the
        // finished sets.
        await sleep(5);
      }
      for (const [n, t] of [
        ['a', 't1'],
        ['e', 't5'],
        ['c', 't3'],
      ]) {
        await held[n].moveToCompleted(n, t, false);
        await sleep(5);
      }
      await held.b.moveToFailed(new Error('b'), 't2', false);
      for (const n of ['g', 'h', 'i', 'j']) {
        await q.add(n, {});
      }
      const out: Record<string, unknown> = {
        counts: await q.getJobCounts(...states),
        perPriority: await q.getCountsPerPriority([0, 1, 2, 3, 4]),
      };
      for (const type of states) {
        for (const [start, end] of [
          [0, 0],
          [0, 1],
          [1, 2],
          [2, 5],
          [0, -1],
          [1, -1],
        ]) {
          for (const asc of [false, true]) {
            out[`${type} ${start}..${end} ${asc ? 'asc' : 'desc'}`] = (await q.getJobs(type, start, end, asc)).map(
              j => j.name,
            );
          }
        }
      }
      return out;
    });
    expect(r.bullmq['active 0..0 asc']).toEqual(['d']);
    expect(r.bullmq['completed 0..1 desc']).toEqual(['c', 'e']);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('refusals', () => {
  it('are the same errors, with the same messages', async () => {
    const r = await both(async ({ q, w }) => {
      const out: [string, string][] = [];
      const tryIt = async (what: string, f: () => Promise<unknown>) => {
        try {
          const v = await f();
          out.push([what, `ok ${JSON.stringify(v ?? null)}`]);
        } catch (e) {
          out.push([what, `error ${(e as Error).message}`]);
        }
      };
      await q.add('a', {}, { jobId: 'a' });
      await q.add('b', {}, { jobId: 'b' });
      await q.add('d', {}, { jobId: 'd', delay: 60000 });
      const a = (await q.getJob('a'))!;
      await tryIt('retry a waiting job', () => a.retry('failed'));
      await tryIt('promote a waiting job', () => a.promote());
      await tryIt('changeDelay of a waiting job', () => a.changeDelay(10));
      const held = (await w.getNextJob('t1'))!;
      await tryIt('complete with another token', () => held.moveToCompleted('x', 'other', false));
      await tryIt('fail with another token', () => held.moveToFailed(new Error('x'), 'other', false));
      await tryIt('extendLock with another token', () => held.extendLock('other', 1000));
      await tryIt('remove a held job', () => q.remove(held.id!));
      await tryIt('complete', () => held.moveToCompleted('x', 't1', false));
      await tryIt('fail a completed job', () => held.moveToFailed(new Error('x'), 't1', false));
      await tryIt('retry a completed job from failed', () => held.retry('failed'));
      const d = (await q.getJob('d'))!;
      await tryIt('changePriority of a delayed job', () => d.changePriority({ priority: 3 }));
      await tryIt('remove a missing job', () => q.remove('nope'));
      await tryIt('progress of a missing job', () => q.updateJobProgress('nope', 5));
      await tryIt('log of a missing job', () => q.addJobLog('nope', 'line'));
      await tryIt('state of a missing job', () => q.getJobState('nope'));
      await tryIt('getJob of a missing job', () => q.getJob('nope'));
      return out;
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('differ in one place: a finish repeated with its token is done, not refused', async () => {
    // The module keeps a completed job's token so that a finish sent again (a reply lost, a
    // client that resends on reconnect) is answered as the first was, not failed.
    const q = track(new Trafikey.Queue(name, { connection: ours }));
    const w = track(new Trafikey.Worker(name, null, { connection: ours, autorun: false }));
    await q.add('a', {});
    const job = (await w.getNextJob('t1'))!;
    await job.moveToCompleted('x', 't1', false);
    await expect(job.moveToCompleted('x', 't1', false)).resolves.toEqual([]);
    expect(await q.getJobCounts('completed')).toEqual({ completed: 1 });
    await q.obliterate({ force: true });
  });
});

describe('retryJobs', () => {
  it('retries the jobs finished by the time given, in batches until none is left', async () => {
    const r = await both(async ({ q, w }) => {
      const failSome = async (names: string[]) => {
        for (const n of names) {
          await q.add(n, {}, { jobId: n });
          const j = (await w.getNextJob(`t-${n}`))!;
          await j.moveToFailed(new Error(n), `t-${n}`, false);
        }
      };
      await failSome(['a', 'b', 'c', 'd', 'e']);
      await sleep(20);
      const cut = Date.now();
      await sleep(20);
      await failSome(['f', 'g']);
      // Batches of 2: five jobs take three batches; the two failed after the cut stay.
      await q.retryJobs({ state: 'failed', count: 2, timestamp: cut });
      return {
        failed: (await q.getFailed()).map(j => j.name).sort(),
        waiting: (await q.getWaiting()).map(j => j.name).sort(),
      };
    });
    expect(r.bullmq.failed).toEqual(['f', 'g']);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('adding, deduplication and administration', () => {
  it('answer and count as BullMQ does', async () => {
    const r = await both(async ({ q }) => {
      const out: Record<string, unknown> = {};
      const ids = (jobs: { id?: string; name: string }[]) =>
        jobs.map(j => [j.id && !j.id.startsWith('JOB') ? j.id : 'minted', j.name]);
      out.bulk = ids(
        await q.addBulk([
          { name: 'a', data: {}, opts: { jobId: 'a' } },
          { name: 'b', data: {}, opts: { jobId: 'b', priority: 2 } },
          { name: 'a again', data: {}, opts: { jobId: 'a' } },
          { name: 'd1', data: {}, opts: { jobId: 'd1', deduplication: { id: 'k' } } },
          { name: 'd2', data: {}, opts: { jobId: 'd2', deduplication: { id: 'k' } } },
          { name: 'later', data: {}, opts: { jobId: 'later', delay: 60000 } },
        ]),
      );
      out.again = ids([await q.add('a third time', {}, { jobId: 'a' })]);
      out.dedup = await q.getDeduplicationJobId('k');
      out.dedupOther = await q.getDeduplicationJobId('none');
      out.counts = await q.getJobCounts('waiting', 'prioritized', 'delayed');
      await q.pause();
      out.paused = [await q.isPaused(), await q.getJobCounts('waiting', 'prioritized')];
      await q.resume();
      out.released = await q.removeDeduplicationKey('k');
      out.dedupAfter = await q.getDeduplicationJobId('k');
      out.d3 = ids([await q.add('d3', {}, { jobId: 'd3', deduplication: { id: 'k' } })]);
      await q.drain();
      out.drained = await q.getJobCounts('waiting', 'prioritized', 'delayed');
      await q.add('x', {}, { jobId: 'x', delay: 60000 });
      await q.drain(true);
      out.drainedDelayed = await q.getJobCounts('delayed');
      return out;
    });
    expect(r.bullmq.dedup).toBe('d1');
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('a job moved back to wait', () => {
  it('answers the time a manual rate limit still holds the queue', async () => {
    const r = await both(async ({ q, w }) => {
      await q.add('a', {});
      const job = (await w.getNextJob('t1'))!;
      await q.rateLimit(5000);
      const ttl = await job.moveToWait('t1');
      return { ttl: ttl > 0 && ttl <= 5000, state: await job.getState() };
    });
    expect(r.bullmq.ttl).toBe(true);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('logs', () => {
  it('page, keep and clear as BullMQ does', async () => {
    const r = await both(async ({ q }) => {
      const job = await q.add('a', {});
      const out: unknown[] = [];
      for (let i = 1; i <= 6; i++) {
        out.push(await job.log(`line ${i}`));
      }
      for (const [start, end] of [
        [0, 0],
        [0, 2],
        [2, 4],
        [1, -1],
        [0, -1],
        [4, 9],
      ]) {
        for (const asc of [true, false]) {
          out.push([start, end, asc, await q.getJobLogs(job.id!, start, end, asc)]);
        }
      }
      out.push(await q.addJobLog(job.id!, 'kept', 3));
      out.push(await q.getJobLogs(job.id!));
      await job.clearLogs(2);
      out.push(await q.getJobLogs(job.id!));
      await job.clearLogs();
      out.push(await q.getJobLogs(job.id!));
      return out;
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('job schedulers', () => {
  it('are listed and read back as BullMQ lists and reads them', async () => {
    const r = await both(async ({ q }) => {
      await q.upsertJobScheduler('every', { every: 60000 }, { name: 'tick', data: { x: 1 }, opts: { attempts: 2 } });
      await q.upsertJobScheduler('cron', { pattern: '0 0 1 1 *', limit: 3 }, { name: 'yearly' });
      await q.upsertJobScheduler('late', { every: 3600000, startDate: Date.now() + 7200000 });
      const shown = (s: object | undefined) => {
        if (!s) {
          return s;
        }
        const v: Record<string, unknown> = { ...s };
        for (const t of ['next', 'startDate', 'offset']) {
          if (t in v) {
            v[t] = typeof v[t];
          }
        }
        return v;
      };
      return {
        count: await q.getJobSchedulersCount(),
        list: (await q.getJobSchedulers()).map(shown),
        asc: (await q.getJobSchedulers(0, 1, true)).map(s => s.key),
        one: shown(await q.getJobScheduler('every')),
        none: await q.getJobScheduler('nope'),
        removed: [await q.removeJobScheduler('cron'), await q.removeJobScheduler('cron')],
        after: (await q.getJobSchedulers()).map(s => s.key),
        counts: await q.getJobCounts('delayed', 'waiting'),
      };
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('queue meta', () => {
  it('global limits and client fields read back as BullMQ reads them', async () => {
    const r = await both(async ({ q }) => {
      const out: Record<string, unknown> = {};
      const look = async (step: string) => {
        const meta = (await q.getMeta()) as Record<string, unknown>;
        // Every field but the store's own version stamp.
        const { version: _v, ...rest } = meta;
        out[`${step}: fields`] = Object.keys(rest).sort();
        out[step] = {
          concurrency: await q.getGlobalConcurrency(),
          rate: await q.getGlobalRateLimit(),
          meta: {
            concurrency: meta.concurrency,
            max: meta.max,
            duration: meta.duration,
            paused: meta.paused,
            mine: meta.mine,
          },
        };
      };
      await look('fresh');
      await q.setGlobalConcurrency(4);
      await q.setGlobalRateLimit(10, 1000);
      await look('set');
      // The backend's own call, one field at a time: the other keeps its value.
      await q.backend.setQueueMeta({ max: 20 });
      await look('max alone');
      await q.backend.setQueueMeta({ duration: 5000 });
      await q.backend.setQueueMeta({ mine: 'x' });
      await look('one field a call');
      // One field removed ends the rate limit on both. BullMQ leaves the other field in meta;
      // the module holds the limit as one fact, so both go.
      await q.backend.removeQueueMetaFields(['max']);
      await look('max removed');
      delete (out['max removed'] as { meta: Record<string, unknown> }).meta.duration;
      out['max removed: fields'] = (out['max removed: fields'] as string[]).filter(f => f !== 'duration');
      await q.setGlobalRateLimit(3, 100);
      await q.removeGlobalRateLimit();
      await q.removeGlobalConcurrency();
      await look('removed');
      return out;
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

/** A worker of the store's class that runs `processor`, tracked to be closed after the test. */
function running(
  { c, connection }: Store,
  processor: (job: Job) => Promise<unknown>,
  opts: Record<string, unknown> = {},
): BullWorker {
  return track(new c.Worker(name, processor, { connection, concurrency: 1, ...opts }));
}

/** A finished job as a user reads it back: its JSON without times or ids, and its state. */
async function finished(q: BullQueue, id: string): Promise<unknown> {
  const j = await q.getJob(id);
  if (!j) {
    return null;
  }
  const v = j.asJSON() as unknown as Record<string, unknown>;
  for (const t of ['timestamp', 'processedOn', 'finishedOn', 'id']) {
    v[t] = typeof v[t];
  }
  if (typeof v.stacktrace === 'string') {
    v.stacktrace = (JSON.parse(v.stacktrace) as string[]).map(s => s.split('\n')[0]);
  }
  return { ...v, processedBy: j.processedBy, state: await j.getState(), logs: (await q.getJobLogs(id)).logs };
}

describe('a running worker', () => {
  it('processes, retries, gives up and reports as BullMQ does', async () => {
    const r = await both(async s => {
      const { q } = s;
      const seen: unknown[] = [];
      const processor = async (job: Job) => {
        seen.push(['process', job.name, job.attemptsMade, job.attemptsStarted]);
        await job.log(`try ${job.attemptsMade}`);
        await job.updateProgress(job.attemptsMade * 10);
        switch (job.name) {
          case 'ok':
            return { got: job.data };
          case 'twice':
            if (job.attemptsMade < 1) {
              throw new Error('once more');
            }
            return 'second time';
          case 'never':
            throw new Error(`no ${job.attemptsMade}`);
          case 'unrecoverable':
            throw new UnrecoverableError('give up now');
          case 'custom':
            throw new Error('custom backoff');
          default:
            return null;
        }
      };
      const w = running(s, processor, {
        name: 'w1',
        settings: { backoffStrategy: (made: number) => (made >= 2 ? -1 : 0) },
      });
      for (const ev of ['completed', 'failed', 'progress'] as const) {
        w.on(ev, (job: Job | undefined, x: unknown) =>
          seen.push([ev, job?.name, ev === 'failed' ? (x as Error).message : x]),
        );
      }
      await q.add('ok', { v: 1 }, { jobId: 'ok' });
      await q.add('twice', {}, { jobId: 'twice', attempts: 3 });
      await q.add('never', {}, { jobId: 'never', attempts: 2 });
      await q.add('unrecoverable', {}, { jobId: 'unrecoverable', attempts: 5 });
      await q.add('custom', {}, { jobId: 'custom', attempts: 9, backoff: { type: 'custom' } });
      await q.add('gone', {}, { jobId: 'gone', removeOnComplete: true });
      await until(
        async () => (await q.getJobCounts('completed', 'failed')).failed === 3 && (await q.getCompletedCount()) === 2,
        10000,
      );
      await until(() => !w.isRunning() || seen.filter(e => (e as string[])[0] === 'completed').length === 3);
      await w.close();
      const jobs: Record<string, unknown> = {};
      for (const id of ['ok', 'twice', 'never', 'unrecoverable', 'custom', 'gone']) {
        jobs[id] = await finished(q, id);
      }
      return { seen, jobs, counts: await q.getJobCounts('completed', 'failed', 'waiting', 'delayed', 'active') };
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('moves a job where its processor says: delayed, back to wait, rate limited', async () => {
    const r = await both(async s => {
      const { q } = s;
      const seen: unknown[] = [];
      const w: BullWorker = running(s, async (job: Job) => {
        const token = job.token!;
        seen.push(['process', job.name, job.attemptsMade, job.attemptsStarted, await job.getState()]);
        if (job.attemptsStarted > 1) {
          return `again ${job.name}`;
        }
        switch (job.name) {
          case 'delay':
            await job.moveToDelayed(Date.now() + 60000, token);
            throw new DelayedError();
          case 'wait':
            await job.moveToWait(token);
            throw new WaitingError();
          case 'limited':
            await w.rateLimit(60000);
            throw BullWorker.RateLimitError();
          case 'lock':
            await job.extendLock(token, 60000);
            return 'extended';
          default:
            return undefined;
        }
      });
      w.on('completed', (job: Job, v: unknown) => seen.push(['completed', job.name, v]));
      w.on('failed', (job: Job | undefined, e: Error) => seen.push(['failed', job?.name, e.message]));
      for (const n of ['delay', 'wait', 'lock', 'undefined']) {
        // A job's id names its key in BullMQ's store: `wait` would be the wait list's.
        await q.add(n, {}, { jobId: `j-${n}`, attempts: 3 });
      }
      await until(
        async () =>
          (await q.getCompletedCount()) === 3 && (await q.getFailedCount()) === 0 && (await q.getDelayedCount()) === 1,
      );
      await q.add('limited', {}, { jobId: 'j-limited', attempts: 3 });
      await until(async () => (await q.getJobCounts('waiting')).waiting === 1 && (await q.getRateLimitTtl()) > 0);
      const ttl = await q.getRateLimitTtl();
      // Time for a job delayed by mistake for ms instead of a minute to come back and run.
      await sleep(150);
      await w.close();
      const jobs: Record<string, unknown> = {};
      for (const id of ['delay', 'wait', 'lock', 'undefined', 'limited']) {
        jobs[id] = await finished(q, `j-${id}`);
      }
      return { seen, jobs, limited: ttl > 50000 && ttl <= 60000 };
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('with several jobs at once, ends with the same results, attempts and counts', async () => {
    const r = await both(async s => {
      const { q } = s;
      const w = running(
        s,
        async (job: Job) => {
          await sleep(job.data.i % 3);
          if (job.data.i % 4 === 0 && job.attemptsMade === 0) {
            throw new Error(`first try of ${job.data.i}`);
          }
          if (job.data.i % 7 === 0) {
            throw new Error(`never ${job.data.i}`);
          }
          return job.data.i * 2;
        },
        { concurrency: 4 },
      );
      const workers: number[] = [];
      w.on('active', async () => workers.push((await q.getWorkersCount()) > 0 ? 1 : 0));
      await q.addBulk(
        Array.from({ length: 24 }, (_, i) => ({ name: `j${i}`, data: { i }, opts: { jobId: `j${i}`, attempts: 2 } })),
      );
      await until(async () => {
        const c = await q.getJobCounts('completed', 'failed');
        return c.completed + c.failed === 24;
      });
      await w.close();
      const jobs = await Promise.all(
        Array.from({ length: 24 }, async (_, i) => {
          const j = (await q.getJob(`j${i}`))!;
          return [j.id, await j.getState(), j.returnvalue, j.failedReason, j.attemptsMade, j.attemptsStarted];
        }),
      );
      return {
        jobs,
        counts: await q.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed'),
        workersSeen: workers.length > 0 && workers.every(x => x === 1),
      };
    });
    expect(r.bullmq.counts).toEqual({ completed: 20, failed: 4, waiting: 0, active: 0, delayed: 0 });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('takes back a job whose worker died and fails it once it stalled more than allowed', async () => {
    const r = await both(async s => {
      const { c, connection, q } = s;
      const seen: unknown[] = [];
      const dead = track(new c.Worker(name, null, { connection, autorun: false, lockDuration: 300 }));
      await q.add('once', {}, { jobId: 'once' });
      await dead.getNextJob('dead-1');
      const w = running(s, async (job: Job) => `done ${job.name} ${job.stalledCounter}`, {
        stalledInterval: 200,
        maxStalledCount: 1,
        lockDuration: 300,
      });
      w.on('stalled', (id: string, prev: string) => seen.push(['stalled', id, prev]));
      w.on('completed', (job: Job, v: unknown) => seen.push(['completed', job.id, v]));
      w.on('failed', (job: Job | undefined, e: Error) => seen.push(['failed', job?.id, e.message]));
      await until(async () => (await q.getCompletedCount()) === 1 && seen.length === 2);
      // The module's upkeep takes the lease back, and a worker's check reports it afterwards:
      // the next worker may have finished the job by then. So the two events, in any order.
      return { seen: seen.sort(), once: await finished(q, 'once') };
    });
    expect(r.bullmq.seen).toContainEqual(['stalled', 'once', 'active']);
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it("runs a job scheduler's iterations as BullMQ runs them", async () => {
    const r = await both(async s => {
      const { q } = s;
      const jobs: unknown[] = [];
      let first = 0;
      const w = running(s, async (job: Job) => {
        const at = Number(job.id?.split(':')[2]);
        first ||= at;
        jobs.push({
          name: job.name,
          data: job.data,
          // The times as what they must be: the id's time `every` apart from the first's, a
          // delay the wait from the job's creation until that time (the first has none; BullMQ
          // reads its clock twice, a few ms apart).
          opts: {
            ...job.opts,
            jobId: (at - first) % 150,
            timestamp: typeof job.opts.timestamp,
            delay: !job.opts.delay
              ? 'none'
              : Math.abs(at - job.opts.delay - job.opts.timestamp!) <= 5
                ? 'until then'
                : job.opts.delay,
          },
          repeatJobKey: job.repeatJobKey,
        });
        return jobs.length;
      });
      await q.upsertJobScheduler(
        'tick',
        { every: 150, limit: 3 },
        { name: 'tock', data: { v: 1 }, opts: { attempts: 2, removeOnComplete: 10 } },
      );
      await until(async () => (await q.getCompletedCount()) === 3);
      await sleep(400);
      await w.close();
      return {
        jobs,
        counts: await q.getJobCounts('completed', 'delayed', 'waiting'),
        scheduler: (await q.getJobScheduler('tick')) ?? null,
        completed: (await q.getCompleted()).map(j => [j.name, j.returnvalue]),
      };
    });
    // BullMQ keeps a scheduler that has made its last iteration; the module deletes it.
    expect(r.bullmq.scheduler).toMatchObject({ key: 'tick', iterationCount: 3 });
    expect(r.trafikey.scheduler).toBeNull();
    expect({ ...r.trafikey, scheduler: 'ended' }).toEqual({ ...r.bullmq, scheduler: 'ended' });
  });

  it('gives QueueEvents the same story as it runs', async () => {
    const r = await both(s =>
      eventsOf(s, async q => {
        // Every job added before the worker starts: the events of adds and claims do not interleave.
        await q.add('good', { v: 1 }, { jobId: 'good' });
        await q.add('flaky', {}, { jobId: 'flaky', attempts: 2 });
        // A backoff long enough to be waited out with nothing else to do: a worker's finish
        // says `drained` only once no retry is to come.
        await q.add('bad', {}, { jobId: 'bad', attempts: 2, backoff: { type: 'fixed', delay: 300 } });
        await q.add('gone', {}, { jobId: 'gone', removeOnComplete: true });
        const w = running(s, async (job: Job) => {
          await job.updateProgress({ at: job.attemptsMade });
          if (job.name === 'flaky' && job.attemptsMade === 0) {
            throw new Error('flaky');
          }
          if (job.name === 'bad') {
            throw new Error('bad');
          }
          return { name: job.name };
        });
        await until(async () => (await q.getCompletedCount()) === 2 && (await q.getFailedCount()) === 1);
        await w.close();
      }),
    );
    expect(r.bullmq.map(([e]) => e)).toContain('retries-exhausted');
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('keeps the finished jobs its options say, with their logs', async () => {
    const r = await both(async s => {
      const { q } = s;
      const w = running(
        s,
        async (job: Job) => {
          for (let i = 0; i < 4; i++) {
            await job.log(`${job.name} ${i}`);
          }
          if (job.data.fail) {
            throw new Error(job.name);
          }
          return job.name;
        },
        { removeOnComplete: { count: 2 }, removeOnFail: { count: 1 } },
      );
      for (let i = 0; i < 5; i++) {
        await q.add(`ok${i}`, {}, { jobId: `ok${i}`, keepLogs: 2 });
      }
      for (let i = 0; i < 3; i++) {
        await q.add(`bad${i}`, { fail: true }, { jobId: `bad${i}` });
      }
      await q.add('own', {}, { jobId: 'own', removeOnComplete: false });
      await q.add('aged', {}, { jobId: 'aged', removeOnComplete: { age: 3600 } });
      await until(
        async () =>
          (await q.getJobCounts('waiting', 'active')).waiting + (await q.getActiveCount()) === 0 &&
          (await q.getJob('aged'))?.finishedOn !== undefined,
      );
      await w.close();
      const logs: Record<string, unknown> = {};
      for (const j of [...(await q.getCompleted()), ...(await q.getFailed())]) {
        logs[j.id!] = (await q.getJobLogs(j.id!)).logs;
      }
      return {
        completed: (await q.getCompleted()).map(j => j.id).sort(),
        failed: (await q.getFailed()).map(j => j.id).sort(),
        logs,
      };
    });
    expect(r.bullmq.failed).toEqual(['bad2']);
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('runs no more jobs at once than the global concurrency, and honours a rate limit', async () => {
    const r = await both(async s => {
      const { q } = s;
      await q.setGlobalConcurrency(2);
      let now = 0;
      let most = 0;
      const w = running(
        s,
        async () => {
          most = Math.max(most, ++now);
          await sleep(30);
          now--;
        },
        { concurrency: 5 },
      );
      await q.addBulk(Array.from({ length: 10 }, (_, i) => ({ name: `c${i}`, data: {} })));
      await until(async () => (await q.getCompletedCount()) === 10);
      await w.close();
      await q.removeGlobalConcurrency();
      const limited = running(s, async () => undefined, { limiter: { max: 3, duration: 60000 } });
      await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: `r${i}`, data: {} })));
      await until(async () => (await q.getCompletedCount()) === 13);
      // The limiter holds the rest for the window: none more is done.
      await sleep(300);
      const done = await q.getCompletedCount();
      const ttl = await q.getRateLimitTtl(3);
      await limited.close();
      return { most, done, waiting: await q.getWaitingCount(), limited: ttl > 50000 };
    });
    expect(r.bullmq).toEqual({ most: 2, done: 13, waiting: 2, limited: true });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('runs a processor in a child process or a worker thread as BullMQ runs it', async () => {
    const processor = fileURLToPath(new URL('./fixtures/sandboxed.cjs', import.meta.url));
    const r = await both(async ({ c, connection, q }) => {
      const out: Record<string, unknown> = {};
      for (const useWorkerThreads of [false, true]) {
        const seen: [string, unknown, unknown][] = [];
        const w = track(new c.Worker(name, processor, { connection, useWorkerThreads }));
        w.on('completed', (job: Job, v: unknown) => seen.push(['completed', job.name, v]));
        w.on('failed', (job: Job | undefined, e: Error) => seen.push(['failed', job?.name, e.message]));
        w.on('progress', (job: Job, p: unknown) => seen.push(['progress', job.name, p]));
        const tag = useWorkerThreads ? 'thread' : 'child';
        await q.add(`${tag}-ok`, { v: 1 }, { jobId: `${tag}-ok` });
        await q.add(`${tag}-retried`, { fail: 1 }, { jobId: `${tag}-retried`, attempts: 2 });
        await q.add(`${tag}-failed`, { fail: 5 }, { jobId: `${tag}-failed`, attempts: 2 });
        // Five finishes: one completed, one failed then completed, one failed twice.
        await until(async () => seen.filter(([e]) => e !== 'progress').length === 5, 15000);
        await w.close();
        out[tag] = {
          seen: seen.sort(),
          jobs: await Promise.all(['ok', 'retried', 'failed'].map(n => finished(q, `${tag}-${n}`))),
        };
      }
      return out;
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('answers what a user asks of its jobs, its workers and its queue while it runs', async () => {
    const r = await both(async s => {
      const { c, connection, q } = s;
      const qe = track(new c.QueueEvents(name, { connection }));
      await qe.waitUntilReady();
      let release!: () => void;
      const gate = new Promise<void>(ok => (release = ok));
      const workerEvents: string[] = [];
      const w = running(
        s,
        async (job: Job) => {
          if (job.name === 'held') {
            await gate;
          }
          if (job.name === 'bad') {
            throw new Error('bad job');
          }
          return `${job.name} done`;
        },
        { name: 'the-worker', concurrency: 2 },
      );
      for (const e of ['active', 'completed', 'failed', 'drained'] as const) {
        w.on(e, () => workerEvents.push(e));
      }
      const held = await q.add('held', {}, { jobId: 'held' });
      await until(async () => (await held.getState()) === 'active');
      const ok = await q.add('ok', {}, { jobId: 'ok' });
      const bad = await q.add('bad', {}, { jobId: 'bad' });
      const out: Record<string, unknown> = {
        ok: await ok.waitUntilFinished(qe, 5000),
        bad: await bad.waitUntilFinished(qe, 5000).then(
          v => ['resolved', v],
          (e: Error) => ['rejected', e.message],
        ),
      };
      await until(async () => (await q.getActiveCount()) === 1);
      // Paused first: the worker's free slot takes nothing added now.
      await q.pause();
      await q.add('later', {}, { jobId: 'later', delay: 60000 });
      await q.add('prio', {}, { jobId: 'prio', priority: 4 });
      out.whileRunning = {
        predicates: await Promise.all(
          ['held', 'ok', 'bad', 'later', 'prio'].map(async id => {
            const j = (await q.getJob(id))!;
            return [
              id,
              await j.isActive(),
              await j.isCompleted(),
              await j.isFailed(),
              await j.isDelayed(),
              await j.isWaiting(),
              await j.isWaitingChildren(),
            ];
          }),
        ),
        workers: (await q.getWorkers()).map(x => x.rawname ?? x.name).sort(),
        workersCount: await q.getWorkersCount(),
        count: await q.count(),
        byTypes: await q.getJobCountByTypes('active', 'completed', 'failed', 'delayed', 'prioritized'),
        mixed: (await q.getJobs(['completed', 'failed', 'active'])).map(j => j.id).sort(),
        rateLimitTtl: await q.getRateLimitTtl(),
        missingState: await q.getJobState('nope'),
      };
      await q.resume();
      release();
      await until(async () => (await q.getCompletedCount()) === 3);
      await w.close();
      out.workerEvents = [...new Set(workerEvents)].sort();
      out.workersAfter = (await q.getWorkers()).map(x => x.rawname ?? x.name).sort();
      return out;
    });
    expect(r.bullmq.ok).toBe('ok done');
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('takes jobs in the same order: priorities, LIFO, FIFO and delays come due', async () => {
    const r = await both(async s => {
      const { q } = s;
      await q.add('fifo1', {});
      await q.add('p5a', {}, { priority: 5 });
      await q.add('lifo1', {}, { lifo: true });
      await q.add('p1', {}, { priority: 1 });
      await q.add('fifo2', {});
      await q.add('p5b', {}, { priority: 5 });
      await q.add('lifo2', {}, { lifo: true });
      await q.add('late', {}, { delay: 400 });
      await q.add('soon', {}, { delay: 200 });
      await q.addBulk([
        { name: 'bulk-p3', data: {}, opts: { priority: 3 } },
        { name: 'bulk-fifo', data: {} },
        { name: 'bulk-lifo', data: {}, opts: { lifo: true } },
      ]);
      const order: string[] = [];
      const w = running(s, async (job: Job) => void order.push(job.name));
      await until(() => order.length === 12);
      await w.close();
      return order;
    });
    expect(r.bullmq.slice(-2)).toEqual(['soon', 'late']);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('deduplication with a running worker', () => {
  it('keeps an id as long as BullMQ keeps it: the job, or the TTL', async () => {
    const r = await both(async s => {
      const { q } = s;
      const done: string[] = [];
      const w = running(s, async (job: Job) => {
        done.push(job.name);
        if (job.name.startsWith('bad')) {
          throw new Error('bad');
        }
      });
      const out: Record<string, unknown> = {};
      const holder = async (id: string) => ((await q.getDeduplicationJobId(id)) ? 'held' : 'free');
      await q.add('simple', {}, { deduplication: { id: 'simple' } });
      await q.add('ttl', {}, { deduplication: { id: 'ttl', ttl: 60000 } });
      await q.add('bad', {}, { deduplication: { id: 'bad' } });
      await until(() => done.length === 3);
      await until(async () => (await q.getCompletedCount()) === 2 && (await q.getFailedCount()) === 1);
      out.afterFinish = [await holder('simple'), await holder('ttl'), await holder('bad')];
      const again = async (name: string, id: string, ttl?: number) => {
        const j = await q.add(name, {}, { deduplication: ttl ? { id, ttl } : { id } });
        return (await q.getJob(j.id!))?.name ?? null;
      };
      out.addedAgain = [
        await again('simple2', 'simple'),
        await again('ttl2', 'ttl', 60000),
        await again('bad2', 'bad'),
      ];
      await until(() => done.length === 5);
      await w.close();
      out.done = [...done].sort();
      return out;
    });
    expect(r.bullmq.afterFinish).toEqual(['free', 'held', 'free']);
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('keeps the last job added while its holder runs, and adds it when the holder is done', async () => {
    const r = await both(async s => {
      const { c, connection, q } = s;
      const qe = track(new c.QueueEvents(name, { connection }));
      await qe.waitUntilReady();
      const deduplicated: unknown[] = [];
      qe.on('deduplicated', ({ deduplicationId }) => deduplicated.push(deduplicationId));
      let release!: () => void;
      const gate = new Promise<void>(ok => (release = ok));
      const done: unknown[] = [];
      const w = running(s, async (job: Job) => {
        if (job.data.seq === 1) {
          await gate;
        }
        done.push([job.name, job.data]);
        return job.data.seq;
      });
      const dedup = { id: 'last', keepLastIfActive: true };
      const first = await q.add('a', { seq: 1 }, { deduplication: dedup });
      await until(async () => (await first.getState()) === 'active');
      const again = [];
      for (const seq of [2, 3, 4]) {
        again.push((await q.add('a', { seq }, { deduplication: dedup })).id === first.id);
      }
      const whileActive = await q.getJobCounts('waiting', 'active', 'delayed');
      release();
      await until(() => done.length === 2);
      await until(async () => (await q.getCompletedCount()) === 2);
      await w.close();
      return { again, whileActive, done, deduplicated, holder: (await q.getDeduplicationJobId('last')) === null };
    });
    expect(r.bullmq.done).toEqual([
      ['a', { seq: 1 }],
      ['a', { seq: 4 }],
    ]);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('metrics', () => {
  it('count the jobs a worker finished as BullMQ counts them', async () => {
    const r = await both(async s => {
      const { q } = s;
      const w = running(
        s,
        async (job: Job) => {
          if (job.data.bad) {
            throw new Error('bad');
          }
        },
        { metrics: { maxDataPoints: 10 } },
      );
      await q.addBulk(Array.from({ length: 7 }, (_, i) => ({ name: `m${i}`, data: { bad: i % 3 === 0 } })));
      await until(async () => (await q.getCompletedCount()) + (await q.getFailedCount()) === 7);
      await w.close();
      const seen = async (type: 'completed' | 'failed') => {
        const m = await q.getMetrics(type);
        // The points are per minute, and the jobs may fall in one minute or two: their sum.
        return { total: m.data.reduce((a, b) => a + b, 0), meta: m.meta.count };
      };
      return { completed: await seen('completed'), failed: await seen('failed') };
    });
    expect(r.bullmq.completed.meta).toBe(4);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('a worker paused and a custom event', () => {
  it('takes nothing while paused and everything once resumed; custom events reach QueueEvents', async () => {
    const r = await both(async s => {
      const { c, connection, q } = s;
      const done: string[] = [];
      const w = running(s, async (job: Job) => void done.push(job.name));
      await q.add('before', {});
      await until(() => done.length === 1);
      await w.pause();
      const paused = [w.isPaused(), await q.isPaused()];
      await q.add('during1', {});
      await q.add('during2', {});
      await sleep(200);
      const whilePaused = { done: [...done], waiting: await q.getWaitingCount() };
      w.resume();
      await until(() => done.length === 3);
      await w.close();
      const qe = track(new c.QueueEvents(name, { connection }));
      await qe.waitUntilReady();
      const custom: unknown[] = [];
      qe.on('order-shipped' as 'completed', (args: unknown, id: string) => custom.push([args, typeof id]));
      const producer = track(new c.QueueEventsProducer(name, { connection }));
      await producer.publishEvent({ eventName: 'order-shipped', order: '7', items: '3' });
      await until(() => custom.length === 1);
      return { paused, whilePaused, done: [...done].sort(), custom };
    });
    expect(r.bullmq.whilePaused).toEqual({ done: ['before'], waiting: 2 });
    expect(r.bullmq.custom).toEqual([[{ order: '7', items: '3' }, 'string']]);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('delayed jobs', () => {
  it('list by due time, move with changeDelay, and all come out with promoteJobs', async () => {
    const r = await both(async ({ q }) => {
      const out: Record<string, unknown> = {};
      for (const [n, delay] of [
        ['d3', 90000],
        ['d1', 30000],
        ['d2', 60000],
        ['p', 45000],
      ] as const) {
        await q.add(n, {}, { jobId: n, delay, priority: n === 'p' ? 2 : undefined });
      }
      out.byDue = (await q.getDelayed()).map(j => j.id);
      await (await q.getJob('d3'))!.changeDelay(10000);
      out.afterChange = (await q.getDelayed(0, -1)).map(j => j.id);
      out.asc = (await q.getJobs('delayed', 0, 1, true)).map(j => j.id);
      await q.promoteJobs({ count: 2 });
      out.delayedLeft = await q.getDelayedCount();
      out.waiting = (await q.getWaiting()).map(j => j.id).filter(id => id !== 'p');
      out.p = await q.getJobState('p');
      return out;
    });
    // BullMQ's promoteJobs puts a job with a priority in `wait` ("does not support jobs with
    // priorities", its script says): it is then taken before jobs of higher priority. The
    // module promotes it by its priority, as every other way a delayed job becomes ready.
    expect([r.bullmq.p, r.trafikey.p]).toEqual(['waiting', 'prioritized']);
    expect({ ...r.trafikey, p: 'ready' }).toEqual({ ...r.bullmq, p: 'ready' });
  });
});

describe('more pages and moves', () => {
  it('list LIFO jobs, retry completed ones, remove finished ones and hand out nothing while paused', async () => {
    const r = await both(async ({ c, connection, q, w }) => {
      const out: Record<string, unknown> = {};
      const qe = track(new c.QueueEvents(name, { connection }));
      await qe.waitUntilReady();
      const removed: unknown[] = [];
      qe.on('removed', ({ jobId, prev }) => removed.push([jobId, prev]));
      for (const [n, lifo] of [
        ['f1', false],
        ['l1', true],
        ['f2', false],
        ['l2', true],
      ] as const) {
        await q.add(n, {}, { jobId: n, lifo });
      }
      out.pages = [
        await q.getJobs('waiting', 0, -1, true),
        await q.getJobs('waiting', 0, 1, false),
        await q.getJobs('waiting', 1, 2, true),
      ].map(p => p.map(j => j.id));
      for (const t of ['t1', 't2', 't3']) {
        const j = (await w.getNextJob(t))!;
        await j.moveToCompleted(`done ${j.id}`, t, false);
      }
      await q.retryJobs({ state: 'completed' });
      out.afterRetry = await q.getJobCounts('waiting', 'completed');
      out.retried = (await q.getJob('l2'))!.returnvalue ?? null;
      const x = (await w.getNextJob('t4'))!;
      await x.moveToFailed(new Error('x'), 't4', false);
      await (await q.getJob(x.id!))!.remove();
      await q.pause();
      out.whilePaused = (await w.getNextJob('t5')) ?? null;
      await q.resume();
      await until(() => removed.length === 1);
      out.removed = removed;
      out.left = await q.getJobCounts('waiting', 'active', 'failed', 'completed');
      return out;
    });
    expect(r.bullmq.removed).toEqual([['f2', 'failed']]);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('custom ids', () => {
  it('take the same ids and refuse the same ones', async () => {
    const r = await both(async ({ q, w }) => {
      const out: [string, string][] = [];
      for (const id of [
        'plain',
        'with space',
        'ünïcødé',
        'x'.repeat(200),
        'y'.repeat(300),
        'z'.repeat(4096),
        '123',
        '12a',
        'a:b',
        '-1',
        '0',
        'JOB8ydNHDKcywZ',
      ]) {
        try {
          const j = await q.add('n', { id }, { jobId: id });
          const back = await q.getJob(j.id!);
          out.push([id, `ok ${j.id === id} ${back?.data.id === id} ${await q.getJobState(id)}`]);
        } catch (e) {
          out.push([id, `error ${(e as Error).message}`]);
        }
      }
      const j = (await w.getNextJob('t'))!;
      await j.moveToCompleted('r', 't', false);
      out.push(['finished', `${j.id} ${await q.getJobState(j.id!)} ${JSON.stringify(await q.getJobLogs('nope'))}`]);
      return out;
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('differ in one place: a custom id is at most 4096 bytes on trafikey', async () => {
    const q = track(new Trafikey.Queue(name, { connection: ours }));
    await expect(q.add('n', {}, { jobId: 'k'.repeat(4097) })).rejects.toThrow('ALIAS must be 1..=4096 bytes');
    expect(await q.getJobCounts('waiting')).toEqual({ waiting: 0 });
    await q.obliterate({ force: true });
  });
});

describe('exports and trims', () => {
  it('export the same Prometheus gauges and trim the events stream as BullMQ does', async () => {
    const r = await both(async ({ q, w }) => {
      await q.add('w', {});
      await q.add('p', {}, { priority: 3 });
      await q.add('d', {}, { delay: 60000 });
      const j = (await w.getNextJob('t'))!;
      await j.moveToCompleted('r', 't', false);
      const k = (await w.getNextJob('u'))!;
      await k.moveToFailed(new Error('x'), 'u', false);
      await q.add('active', {});
      await w.getNextJob('v');
      const prometheus = (await q.exportPrometheusMetrics({ env: 'test' })).split(name).join('<queue>');
      const trimmed = await q.trimEvents(0);
      return { prometheus, trimmed: typeof trimmed };
    });
    expect(r.bullmq.prometheus).toContain('bullmq_job_count{queue="<queue>", state="completed", env="test"} 1');
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('clean and obliterate', () => {
  it('take the same jobs from each state, and refuse the same', async () => {
    const r = await both(async ({ q, w }) => {
      const out: Record<string, unknown> = {};
      const names = async (ids: string[]) => ids.sort();
      for (const n of ['w1', 'w2', 'w3']) {
        await q.add(n, {}, { jobId: n });
      }
      await q.add('d1', {}, { jobId: 'd1', delay: 60000 });
      await q.add('d2', {}, { jobId: 'd2', delay: 60000 });
      await q.add('p1', {}, { jobId: 'p1', priority: 2 });
      for (const t of ['t1', 't2', 't3']) {
        const j = (await w.getNextJob(t))!;
        if (t === 't3') {
          await j.moveToFailed(new Error('x'), t, false);
        } else {
          await j.moveToCompleted('ok', t, false);
        }
      }
      await q.add('w4', {}, { jobId: 'w4' });
      await q.add('w5', {}, { jobId: 'w5' });
      await q.add('held', {}, { jobId: 'held', priority: 1 });
      await w.getNextJob('t4');
      await sleep(10);
      out.graceKeepsAll = await names(await q.clean(60000, 100, 'completed'));
      out.completedLimited = await q.clean(0, 1, 'completed');
      out.completed = await names(await q.clean(0, 100, 'completed'));
      out.failed = await names(await q.clean(0, 100, 'failed'));
      out.delayed = await names(await q.clean(0, 100, 'delayed'));
      out.prioritized = await names(await q.clean(0, 100, 'prioritized'));
      out.wait = await names(await q.clean(0, 1, 'wait'));
      out.active = await names(await q.clean(0, 100, 'active'));
      out.counts = await q.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized');
      out.obliterate = await q.obliterate().then(
        () => 'done',
        (e: Error) => e.message,
      );
      out.after = await q.getJobCounts('waiting', 'active');
      return out;
    });
    expect(r.bullmq.obliterate).toBe('Cannot obliterate queue with active jobs');
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('QueueEvents started late', () => {
  it('replays the same story from the first event', async () => {
    const r = await both(async s => {
      const { c, connection, q } = s;
      const w = running(s, async (job: Job) => {
        if (job.name === 'bad') {
          throw new Error('bad');
        }
        return job.name;
      });
      await q.add('kept', {}, { jobId: 'kept' });
      await q.add('gone', {}, { jobId: 'gone', removeOnComplete: true });
      await q.add('bad', {}, { jobId: 'bad', removeOnFail: true });
      await q.add('minted', {});
      await until(async () => (await q.getCompletedCount()) === 2 && (await q.getJob('bad')) === undefined);
      await w.close();
      const qe = track(new c.QueueEvents(name, { connection, lastEventId: '0-0' }));
      const seen: [string, unknown][] = [];
      for (const e of ['added', 'waiting', 'active', 'completed', 'failed'] as const) {
        qe.on(e, (a: { jobId: string }) =>
          seen.push([e, a.jobId.startsWith('JOB') || /^\d+$/.test(a.jobId) ? 'minted' : a.jobId]),
        );
      }
      await until(() => seen.filter(([e]) => e === 'completed' || e === 'failed').length === 4);
      return seen;
    });
    expect(r.trafikey).toEqual(r.bullmq);
  });

  it('names a job added before it started by its custom id, its row gone or not', async () => {
    const r = await both(async s => {
      const { c, connection, q } = s;
      await q.add('kept', {}, { jobId: 'kept' });
      await q.add('gone', {}, { jobId: 'gone', removeOnComplete: true });
      await q.add('bad', {}, { jobId: 'bad', removeOnFail: true });
      const qe = track(new c.QueueEvents(name, { connection }));
      await qe.waitUntilReady();
      // The finishes: their events name the job by its alias even when they delete the row.
      // (An `active` event read before the finish but mapped after it would not: the row
      // that names the job is gone by then, and `active` carries no alias.)
      const seen: [string, unknown][] = [];
      for (const e of ['completed', 'failed'] as const) {
        qe.on(e, (a: { jobId: string }) => seen.push([e, a.jobId]));
      }
      const w = running(s, async (job: Job) => {
        if (job.name === 'bad') {
          throw new Error('bad');
        }
        return job.name;
      });
      await until(() => seen.length === 3);
      await w.close();
      return seen;
    });
    expect(r.bullmq).toEqual([
      ['completed', 'kept'],
      ['completed', 'gone'],
      ['failed', 'bad'],
    ]);
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('connections', () => {
  it('with enableOfflineQueue false, wait to be ready before the first call, then fail fast while the server is down', async () => {
    const out: Record<string, unknown> = {};
    for (const [store, { classes }] of Object.entries(stores)) {
      const server = await startServer(store === 'trafikey' ? ['--loadmodule', modulePath()] : []);
      try {
        if (store === 'trafikey') {
          await install(server.port);
        }
        const connection = { host: '127.0.0.1', port: server.port, enableOfflineQueue: false };
        const q = track(new classes.Queue(name, { connection }));
        q.on('error', () => undefined);
        const first = await q.add('first', { n: 1 }).then(
          j => `added ${j.name}`,
          (e: Error) => e.message,
        );
        await stopServer(server);
        const down = await q.add('second', { n: 2 }).then(
          () => 'added',
          (e: Error) => e.message,
        );
        out[store] = { first, down };
        // Closing meets the same refusal on BullMQ's store: the server is gone.
        await q.close().catch(() => undefined);
      } finally {
        await stopServer(server);
      }
    }
    expect(out.bullmq).toEqual({
      first: 'added first',
      down: "Stream isn't writeable and enableOfflineQueue options is false",
    });
    expect(out.trafikey).toEqual(out.bullmq);
  });

  it('report an unreachable server as error events of each class, printing nothing', async () => {
    const port = await freePort();
    const out: Record<string, unknown> = {};
    const printed: string[] = [];
    const writes = {
      stdout: process.stdout.write.bind(process.stdout),
      stderr: process.stderr.write.bind(process.stderr),
    };
    const capture = (chunk: unknown) => {
      printed.push(String(chunk));
      return true;
    };
    for (const [store, { classes }] of Object.entries(stores)) {
      printed.length = 0;
      // The app hands over an ioredis client of its own, with no listener: as BullMQ's docs show.
      const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: null });
      const options = { host: '127.0.0.1', port };
      const errors = { queue: 0, worker: 0, events: 0, clientQueue: 0 };
      process.stdout.write = capture as typeof process.stdout.write;
      process.stderr.write = capture as typeof process.stderr.write;
      try {
        const q = new classes.Queue(name, { connection: options });
        const w = new classes.Worker(name, async () => 1, { connection: options });
        const qe = new classes.QueueEvents(name, { connection: options });
        const q2 = new classes.Queue(name, { connection: client });
        q.on('error', () => errors.queue++);
        w.on('error', () => errors.worker++);
        qe.on('error', () => errors.events++);
        q2.on('error', () => errors.clientQueue++);
        await sleep(2500);
        await Promise.race([Promise.all([w.close(true), qe.close(), q.close(), q2.close()]), sleep(3000)]);
      } finally {
        process.stdout.write = writes.stdout;
        process.stderr.write = writes.stderr;
        client.disconnect();
      }
      out[store] = {
        errorsOnEach: Object.values(errors).every(n => n > 0),
        printed: printed.filter(p => /ECONNREFUSED|ioredis/.test(p)),
      };
    }
    expect(out.bullmq).toEqual({ errorsOnEach: true, printed: [] });
    expect(out.trafikey).toEqual(out.bullmq);
  });
});

describe('a manual rate limit', () => {
  it('holds the queue where a rate limit is set, and nothing where none is, as BullMQ documents', async () => {
    const r = await both(async s => {
      const { q } = s;
      const out: Record<string, unknown> = {};
      // No limiter on any worker, no global rate limit: the queue is not held.
      await q.rateLimit(60000);
      out.ttlUnlimited = (await q.getRateLimitTtl()) > 59000;
      let ran = 0;
      const w = running(s, async () => {
        ran++;
        return 'ok';
      });
      await q.add('free', {});
      await until(async () => (await q.getCompletedCount()) === 1);
      out.ranUnlimited = ran;
      await w.close();
      await q.removeRateLimitKey();
      // A global rate limit set: the same manual limit holds every claim.
      await q.setGlobalRateLimit(100, 1000);
      await q.rateLimit(60000);
      const w2 = running(s, async () => {
        ran++;
        return 'ok';
      });
      await q.add('held', {});
      await sleep(500);
      out.heldWaiting = await q.getWaitingCount();
      out.ranHeld = ran;
      await w2.close();
      return out;
    });
    expect(r.bullmq).toEqual({ ttlUnlimited: true, ranUnlimited: 1, heldWaiting: 1, ranHeld: 1 });
    expect(r.trafikey).toEqual(r.bullmq);
  });
});

describe('step jobs (job.updateData)', () => {
  /**
   * BullMQ's documented step-job pattern: the processor keeps how far it got in the job's data
   * and carries on from there, in one run (`plain`), across a move to delayed (`delayed`) or
   * back to wait (`waiting`) it makes itself, or across retries after a step that threw
   * (`retry`). Each run is recorded with the step it started from.
   */
  async function steps(s: Store, mode: 'plain' | 'delayed' | 'waiting' | 'retry'): Promise<unknown> {
    const { q } = s;
    const runs: unknown[] = [];
    const errors: string[] = [];
    let thrown = false;
    const w = running(
      s,
      async (job: Job, token?: string) => {
        let step = (job.data as { step: number }).step;
        runs.push([job.attemptsMade, step]);
        while (step !== 3) {
          if (step === 0) {
            await job.updateData({ step: 1, note: 'first done' });
            step = 1;
            if (mode === 'delayed') {
              await job.moveToDelayed(Date.now() + 100, token);
              throw new DelayedError();
            }
            if (mode === 'waiting') {
              await job.moveToWait(token);
              throw new WaitingError();
            }
          } else if (step === 1) {
            if (mode === 'retry' && !thrown) {
              thrown = true;
              throw new Error('second step failed once');
            }
            await job.updateData({ step: 2, note: 'second done' });
            step = 2;
          } else {
            await job.updateData({ step: 3, note: 'third done' });
            step = 3;
          }
        }
        return 'finished';
      },
      { concurrency: 2 },
    );
    w.on('error', (e: Error) => errors.push(e.message));
    await q.add('steps', { step: 0 }, { jobId: `steps-${mode}`, attempts: 3, backoff: { type: 'fixed', delay: 50 } });
    await until(async () => (await q.getCompletedCount()) === 1);
    await w.close();
    const job = await q.getJob(`steps-${mode}`);
    return { runs, errors, data: job?.data, returnvalue: job?.returnvalue, attemptsMade: job?.attemptsMade };
  }

  for (const mode of ['plain', 'delayed', 'waiting', 'retry'] as const) {
    it(`carry on from the step kept in their data: ${mode}`, async () => {
      const r = await both(s => steps(s, mode));
      expect(r.bullmq).toMatchObject({ errors: [], data: { step: 3, note: 'third done' }, returnvalue: 'finished' });
      expect(r.trafikey).toEqual(r.bullmq);
    });
  }

  it('replace the data of a job in any state, and refuse a missing job alike', async () => {
    const r = await both(async ({ q, w }) => {
      const out: Record<string, unknown> = {};
      const waiting = await q.add('a', { v: 1 }, { jobId: 'u-wait' });
      await waiting.updateData({ v: 2 });
      out.waiting = (await q.getJob('u-wait'))?.data;
      const delayed = await q.add('b', { v: 1 }, { jobId: 'u-delayed', delay: 60000 });
      await delayed.updateData({ v: 'later' });
      out.delayed = (await q.getJob('u-delayed'))?.data;
      const held = await w.getNextJob('t1');
      await held!.updateData([1, 2, 3]);
      out.active = (await q.getJob(held!.id!))?.data;
      await held!.moveToCompleted('ok', 't1', false);
      await held!.updateData({ after: 'completion' });
      out.completed = (await q.getJob(held!.id!))?.data;
      const gone = await q.add('c', {}, { jobId: 'u-gone' });
      await gone.remove();
      out.missing = await gone.updateData({}).then(
        () => 'replaced',
        (e: Error) => e.message,
      );
      return out;
    });
    expect(r.bullmq).toMatchObject({ waiting: { v: 2 }, missing: 'Missing key for job u-gone. updateData' });
    expect(r.trafikey).toEqual(r.bullmq);
  });
});
