// The backend's calls for a queue, as BullMQ's Queue makes them: adding jobs, pausing,
// draining, cleaning and obliterating, retrying and promoting in bulk, deduplication ids, and
// the queue's meta and limits.
import type { JobJson, JobsOptions, ParentKeyOpts } from 'bullmq';
import { type Arg, type Call, backoffWords, rateArgs } from './commands.js';
import { gather } from './connection.js';
import { isDefaultOpts, jobTime, optsBlob } from './job-data.js';
import { isBranded, mintJobId } from './keys.js';
import { NotSupportedError } from './queue-base.js';
import { LIMIT_FIELDS } from './queue-getters.js';
import { errCode, moved, replies } from './reply.js';
import { WorkerMethods } from './worker.js';

/** TRA.ADD takes at most 250 jobs a call (the module's 2 ms bound). */
const ADD_BATCH = 250;

/**
 * Keys the adapter keeps beside the module's (`limiter`, `stalled-check`, `stalled-seen`), and
 * those an adapter for older modules kept: OBLITERATE does not know them.
 */
const ADAPTER_KEYS = [
  'alias',
  'rev',
  'progress',
  'stack',
  'pb',
  'am',
  'as',
  'err',
  'stalled-check',
  'stalled-seen',
  'dn',
  'limiter',
];

/** BullMQ's deduplication option, as the adapter reads it. */
interface Dedup {
  id?: string;
  ttl?: number;
  extend?: boolean;
  replace?: boolean;
  keepLastIfActive?: boolean;
}

/** A job to add: BullMQ's, its module id, and its custom id (the row's ALIAS) when it has one. */
interface Adding {
  job: JobJson;
  id: string;
  alias?: string;
  jobId: string;
}

export abstract class QueueMethods extends WorkerMethods {
  // ---------------------------------------------------------------- adding

  /** A job's name, data and option words, shared by ENQUEUE/SCHEDULE and TRA.ADD. */
  private addParts(job: JobJson, alias?: string): { name: string; data: string; extra: Arg[]; delay: number } {
    const opts: JobsOptions = job.opts ?? {};
    const given = opts as Record<string, unknown>;
    for (const [opt, feature] of [
      ['parent', 'flows (the parent option)'],
      ['debounce', 'deduplication (debounce: use the deduplication option)'],
      ['repeat', 'job schedulers (the repeat option)'],
    ] as const) {
      if (given[opt]) {
        throw new NotSupportedError(feature);
      }
    }
    const dedup = opts.deduplication as Dedup | undefined;
    const name = job.name && Buffer.byteLength(job.name) <= 256 ? job.name : '_';
    // BullMQ's default options (a job given none) are left out, each waiting job some 19 bytes
    // smaller: BullMQ's Job gives a job read back without options the same defaults.
    const blob: Record<string, unknown> = isDefaultOpts(opts) ? { ts: job.timestamp } : { o: opts, ts: job.timestamp };
    if (name !== job.name) {
      blob.n = job.name;
    }
    const extra: Arg[] = [];
    if (opts.priority) {
      extra.push('PRIORITY', opts.priority);
    }
    if (opts.attempts && opts.attempts > 1) {
      extra.push('ATTEMPTS', opts.attempts);
      extra.push(...backoffWords(opts.backoff));
    }
    extra.push('OPTS', JSON.stringify(blob));
    if (alias !== undefined) {
      extra.push('ALIAS', alias);
    }
    if (dedup?.id !== undefined && dedup.id !== '') {
      // BullMQ's deduplication is the module's DEDUP: live until the job finishes, or for a
      // TTL (EXTEND restarts it on a duplicate); REPLACE replaces a delayed holder.
      extra.push('DEDUP', String(dedup.id));
      // keepLastIfActive: the id lives until its job finishes whatever the TTL, as BullMQ's;
      // KEEPLAST has the server keep a duplicate that comes while the holder is active.
      const ttl = dedup.keepLastIfActive ? 0 : Math.floor(Number(dedup.ttl ?? 0));
      if (dedup.keepLastIfActive) {
        extra.push('KEEPLAST');
      }
      if (ttl > 0) {
        extra.push('DEDUPTTL', ttl);
        if (dedup.extend) {
          extra.push('EXTEND');
        }
      }
      if (dedup.replace) {
        extra.push('REPLACE');
      }
    }
    const delay = Math.max(0, Math.floor(opts.delay ?? 0));
    if (delay === 0 && opts.lifo) {
      extra.push('LIFO');
    }
    return { name, data: job.data ?? '{}', extra, delay };
  }

  /** One job: EMQ.SCHEDULE with a delay, else EMQ.ENQUEUE. */
  private addCmd(a: Adding): Call {
    const { name, data, extra, delay } = this.addParts(a.job, a.alias);
    if (delay > 0) {
      return this.build('EMQ.SCHEDULE', { job: a.id }, `+${delay}`, name, data, ...extra);
    }
    return this.build('EMQ.ENQUEUE', { job: a.id }, name, data, ...extra);
  }

  /** One TRA.ADD of at most {@link ADD_BATCH} jobs: the rows as keys, then `name data k words…` each. */
  private bulkCmd(jobs: Adding[]): Call {
    const body: Arg[] = [];
    for (const j of jobs) {
      const { name, data, extra, delay } = this.addParts(j.job, j.alias);
      if (delay > 0) {
        extra.push('DELAY', `+${delay}`);
      }
      body.push(name, data, extra.length, ...extra);
    }
    return this.build('TRA.ADD', { rows: jobs.map(j => j.id) }, ...body);
  }

  async addJob(job: JobJson, jobId: string, parentKeyOpts?: ParentKeyOpts): Promise<string> {
    if (parentKeyOpts?.parentKey) {
      throw new NotSupportedError('flows (a parent job)');
    }
    const [id] = await this.addJobs([{ job, jobId }]);
    return id;
  }

  /**
   * A custom id is the job's ALIAS, claimed atomically with the row (reply 0: a live job has
   * it, nothing written). One job is ENQUEUE/SCHEDULE; more are TRA.ADD in batches of 250
   * inside one MULTI, so BullMQ's addBulk stays one transaction (no worker sees half a batch).
   * TRA.ADD refuses a whole call on a bad argument; the options are built here, so a refusal
   * is a bug, and it is thrown.
   */
  async addJobs(entries: { job: JobJson; jobId: string; parentKeyOpts?: ParentKeyOpts }[]): Promise<string[]> {
    await this.waitUntilReady();
    for (const e of entries) {
      if (e.parentKeyOpts?.parentKey) {
        throw new NotSupportedError('flows (a parent job)');
      }
    }
    const jobs = entries.map((e): Adding => {
      const custom = !!e.jobId && !isBranded(e.jobId);
      return {
        job: e.job,
        id: custom || !e.jobId ? mintJobId() : e.jobId,
        alias: custom ? e.jobId : undefined,
        jobId: e.jobId,
      };
    });
    // Each job's reply: 1 created, 0 its custom id is taken, or the id of the job holding its
    // deduplication id (nothing created).
    let created: unknown[];
    if (jobs.length === 1) {
      gather(this.conn);
      created = [await this.conn.call(...this.addCmd(jobs[0]))];
    } else {
      const m = this.conn.multi();
      for (let i = 0; i < jobs.length; i += ADD_BATCH) {
        m.call(...this.bulkCmd(jobs.slice(i, i + ADD_BATCH)));
      }
      const res = (await m.exec()) ?? [];
      const refused = res.find(([err]) => err)?.[0];
      if (refused) {
        // Each TRA.ADD is all-or-nothing, a MULTI of several is not: undo the batches that were
        // written, so addBulk adds all or nothing as BullMQ's does (a worker may have taken one).
        const undo = this.conn.pipeline();
        res.forEach(([err, reply], b) => {
          if (!err) {
            (reply as unknown[]).forEach((r, i) => {
              if (Number(r) === 1) {
                undo.call(...this.build('TRA.REMOVE', { job: jobs[b * ADD_BATCH + i].id }));
              }
            });
          }
        });
        await undo.exec();
        throw refused;
      }
      created = res.flatMap(([, reply]) => reply as unknown[]);
    }
    const dup = jobs.filter((_, i) => Number(created[i]) === 0);
    if (dup.length > 0) {
      const p = this.conn.pipeline();
      for (const j of dup) {
        p.xadd(this.key('events'), '*', 'event', 'duplicated', 'jobId', j.jobId);
      }
      await replies(p);
    }
    // A deduplicated job answers with the holder's id, as BullMQ's does (its custom id if any).
    const holders = created.map(r => (typeof r === 'string' || Buffer.isBuffer(r) ? String(r) : null));
    const known = await this.external(holders.filter((h): h is string => h !== null));
    let k = 0;
    return jobs.map((j, i) => (holders[i] !== null ? known[k++] : (j.alias ?? j.id)));
  }

  async addFlow(): Promise<[Error | null, string | number][]> {
    throw new NotSupportedError('flows');
  }

  // ---------------------------------------------------------------- administration

  async retryFinishedJobs(
    state: 'completed' | 'failed' = 'failed',
    count = 1000,
    timestamp = Date.now(),
  ): Promise<number> {
    const ids = await this.conn.zrangebyscore(this.key(state), '-inf', timestamp, 'LIMIT', 0, count);
    if (ids.length === 0) {
      return 0;
    }
    // BullMQ's retryJobs keeps the attempt counters and the progress, as job.retry() does.
    const p = this.conn.pipeline();
    for (const id of ids) {
      p.call(...this.build('EMQ.REPROCESS', { job: id }, 'FROM', state, 'KEEPMADE', 'KEEPSTARTED', 'KEEPPROGRESS'));
    }
    await replies(p, moved);
    return ids.length < count ? 0 : 1;
  }

  async promoteJobs(count = 1000): Promise<number> {
    const ids = await this.conn.zrange(this.key('delayed'), 0, count - 1);
    if (ids.length === 0) {
      return 0;
    }
    const p = this.conn.pipeline();
    for (const id of ids) {
      p.call(...this.build('EMQ.PROMOTE', { job: id }));
    }
    await replies(p, moved);
    return ids.length < count ? 0 : 1;
  }

  async pause(pause: boolean): Promise<void> {
    await this.waitUntilReady();
    await this.send('EMQ.CLAIM', {}, pause ? 'PAUSE' : 'RESUME');
  }

  async drain(delayed: boolean): Promise<void> {
    const args: Arg[] = [...(delayed ? ['DELAYED'] : []), 'COUNT', 10000];
    while (Number(await this.send('TRA.DRAIN', {}, ...args)) > 0) {
      // repeat until a call deletes nothing
    }
  }

  async cleanJobsByState(state: string, timestamp: number, limit = 0): Promise<string[]> {
    const max = limit > 0 ? limit : Infinity;
    const out: string[] = [];
    // The custom ids of the jobs taken, read while their rows still name them.
    const custom = new Map<string, string>();
    if (state === 'completed' || state === 'failed') {
      const grace = Math.max(0, Date.now() - timestamp);
      while (out.length < max) {
        const count = Math.min(10000, max - out.length);
        // A clean takes the oldest finished first: the first `count` of the set are all it may take.
        await this.customIds(await this.conn.zrange(this.key(state), 0, count - 1), custom);
        const ids = (await this.send('TRA.CLEAN', { set: state }, 'GRACE', grace, 'COUNT', count)) as string[];
        out.push(...ids);
        if (ids.length < count) {
          break;
        }
      }
    } else {
      const role =
        state === 'wait' || state === 'waiting' || state === 'paused'
          ? 'wait'
          : state === 'prioritized'
            ? 'prio'
            : state;
      if (role === 'wait' || role === 'prio' || role === 'delayed') {
        out.push(...(await this.cleanReady(role, timestamp, max, custom)));
      }
    }
    return out.map(id => custom.get(id) ?? id);
  }

  /**
   * cleanJobsByState of a set of jobs not yet run: those added at `timestamp` or before, at
   * most `max`, each by TRA.REMOVE, and one `cleaned` event.
   */
  private async cleanReady(
    role: string,
    timestamp: number,
    max: number,
    custom: Map<string, string>,
  ): Promise<string[]> {
    const ids =
      role === 'wait' ? await this.conn.lrange(this.key('wait'), 0, -1) : await this.conn.zrange(this.key(role), 0, -1);
    await this.customIds(ids, custom);
    const p = this.conn.pipeline();
    for (const id of ids) {
      p.hmget(this.jobKey(id), 'o', 'c', 'rs');
    }
    const rows = (await replies(p)).map(r => (r as (string | null)[] | null) ?? [null, null, null]);
    // A job scheduler's pending iteration stays (as BullMQ's clean keeps it): the one its
    // scheduler's hash names.
    const named = this.conn.pipeline();
    for (const [, , rs] of rows) {
      if (rs) {
        named.hget(this.key(`sched:${rs}`), 'job');
      }
    }
    const pendingIds = new Set((await replies(named)).map(r => r as string | null).filter((j): j is string => !!j));
    const rm = this.conn.pipeline();
    const victims: string[] = [];
    ids.forEach((id, i) => {
      const [o, c] = rows[i];
      if ((jobTime(optsBlob(o), c) ?? Infinity) <= timestamp && victims.length < max && !pendingIds.has(id)) {
        victims.push(id);
        rm.call(...this.build('TRA.REMOVE', { job: id }));
      }
    });
    if (victims.length === 0) {
      return [];
    }
    // A job claimed or deleted since it was read is passed over, not reported.
    const done = await replies(rm, moved);
    const removed = victims.filter((_, i) => Number(done[i]) === 1);
    if (removed.length > 0) {
      await this.conn.xadd(this.key('events'), 'MAXLEN', '~', 10000, '*', 'event', 'cleaned', 'count', removed.length);
    }
    return removed;
  }

  async obliterate(opts: { force: boolean; count: number }): Promise<number> {
    await this.waitUntilReady();
    let left: number;
    try {
      left = Number(
        await this.send(
          'TRA.OBLITERATE',
          {},
          ...(opts.force ? ['FORCE'] : []),
          'COUNT',
          Math.min(10000, Math.max(1, opts.count || 1000)),
        ),
      );
    } catch (err) {
      if (errCode(err) === 'EMQSTATE') {
        throw new Error('Cannot obliterate queue with active jobs');
      }
      throw err;
    }
    if (left === 0) {
      await this.conn.del(...ADAPTER_KEYS.map(k => this.key(`b:${k}`)));
    }
    return left;
  }

  async removeOrphanedJobs(): Promise<number> {
    return 0;
  }

  /** TRA.UNDEDUP: releases the id whatever job holds it. */
  async deleteDeduplicationKey(deduplicationId: string): Promise<number> {
    await this.waitUntilReady();
    return Number(await this.send('TRA.UNDEDUP', { dedup: deduplicationId }));
  }

  // ---------------------------------------------------------------- meta and limits

  private async limit(...args: Arg[]): Promise<number> {
    await this.waitUntilReady();
    return Number(await this.send('TRA.LIMIT', {}, ...args));
  }

  async setQueueMeta(values: Record<string, string | number>): Promise<number> {
    // `paused` is the module's own field of meta; a client never writes it directly.
    const { paused: _p, concurrency, max, duration, ...rest } = values;
    let n = 0;
    if (concurrency !== undefined) {
      n += await this.limit('CONCURRENCY', Math.min(2 ** 31 - 1, Math.max(1, Math.floor(Number(concurrency) || 1))));
    }
    if (max !== undefined || duration !== undefined) {
      const l = await this.limits();
      n += await this.limit('RATE', ...rateArgs(max ?? l['rate-max'] ?? 1, duration ?? l['rate-ms'] ?? 1));
    }
    if (Object.keys(rest).length > 0) {
      n += await this.conn.hset(this.key('meta'), rest);
    }
    return n;
  }

  async removeQueueMetaFields(fields: string[]): Promise<number> {
    const f = fields.filter(x => x !== 'paused' && !(x in LIMIT_FIELDS));
    let n = 0;
    if (fields.includes('concurrency')) {
      n += await this.limit('CONCURRENCY', 'OFF');
    }
    if (fields.includes('max') || fields.includes('duration')) {
      n += await this.limit('RATE', 'OFF');
    }
    return n + (f.length ? await this.conn.hdel(this.key('meta'), ...f) : 0);
  }

  /**
   * BullMQ's manual rate limit (`queue.rateLimit`, `worker.rateLimit`): no claim of the queue
   * for ms. It replaces the window in force, as BullMQ's overwrites its limiter key: CLEAR,
   * then FOR, in one transaction.
   */
  async setRateLimit(expireTimeMs: number): Promise<void> {
    await this.waitUntilReady();
    const ms = Math.min(2 ** 31, Math.max(1, Math.floor(expireTimeMs)));
    if ((await this.limits())['rate-max'] === null) {
      // BullMQ's manual limit acts only where a rate limit is set (a worker's limiter or the
      // queue's global one): without one, claims go on and the limit is only a time to read
      // back (getRateLimitTtl, and the wait of the worker that met it).
      await this.conn.set(this.key('b:limiter'), '9007199254740991', 'PX', ms);
      return;
    }
    const res =
      (await this.conn
        .multi()
        .call(...this.build('TRA.LIMIT', {}, 'CLEAR'))
        .call(...this.build('TRA.LIMIT', {}, 'FOR', ms))
        .exec()) ?? [];
    const refused = res.find(([err]) => err)?.[0];
    if (refused) {
      throw refused;
    }
  }

  /** Ends the rate window and a manual limit now (BullMQ deletes its limiter key). */
  async removeRateLimitKey(): Promise<number> {
    const kept = await this.conn.del(this.key('b:limiter'));
    return Math.max(kept, await this.limit('CLEAR'));
  }

  async removeDeprecatedPriorityKey(): Promise<number> {
    return 0;
  }
}
