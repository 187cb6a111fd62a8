// The backend's calls for a worker and the jobs it holds, as BullMQ's Worker (and its Job's
// moves, and Scripts behind them) make them: claiming and waiting for jobs, renewing their
// leases, finishing them (the finish-and-fetch calls of one turn sent together), failing,
// delaying and requeueing them, and reporting the stalls the server reclaimed.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { KeepJobs, MinimalJob, MoveToDelayedOpts, MoveToWaitingChildrenOpts, RetryJobOpts } from 'bullmq';
import { type Arg, keepArgs } from './commands.js';
import { gather } from './connection.js';
import { isBranded } from './keys.js';
import { JobMethods } from './job.js';
import { type Claimed, NotSupportedError } from './queue-base.js';
import { errCode, notHeld } from './reply.js';

/** EMQ.EXTENDS takes at most 250 jobs a call (the module's 2 ms bound). */
const EXTEND_BATCH = 250;
/** Finish-and-fetch calls per TRA.COMPLETESNEXT at most: a write's worth of jobs. */
const FINISHES_MAX = 16;
/** Events a stalled check reads per call, and the calls it makes at most. */
const STALL_PAGE = 500;
const STALL_PAGES = 20;

/** A finish-and-fetch waiting to be sent with the others of its turn. */
interface Finishing {
  id: string;
  token: string;
  rv: string;
  resolve: (f: Finished) => void;
  reject: (err: unknown) => void;
}

/** A finish-and-fetch's answer: 1 finished or 0 a repeat, and the next job with its module token. */
interface Finished {
  done: number;
  token: string;
  job?: unknown[];
}

/**
 * Finish-and-fetch calls waiting to be sent, by connection, then by queue and options: the
 * workers of a process share their command connection, so those of one queue that end jobs in
 * the same turn finish them together, as one worker of many jobs at once does.
 */
const finishing = new WeakMap<Redis, Map<string, Finishing[]>>();

/** BullMQ's answer when no job is handed out: `[jobData, id, rateLimitDelay, delayUntil]`. */
const NONE: unknown[] = [undefined, undefined, 0, 0];

export abstract class WorkerMethods extends JobMethods {
  /** The blocking claim in flight, if any. */
  private waiting: Promise<unknown> | undefined;
  /** Jobs a blocking claim took, handed out by the next moveToActive. */
  private stash: Claimed[] = [];

  // ---------------------------------------------------------------- claiming

  /** `[jobData, id, rateLimitDelay, delayUntil]`, as BullMQ's workers read it. */
  private async handOut(c: Claimed, bull: string): Promise<unknown[]> {
    this.hold(c.id, c.token, bull);
    const json = await this.getJobData(c.id, c.id, c.entry);
    if (!json) {
      this.letGoOf(c.id, c.token);
      return NONE.slice();
    }
    return [json, json.id, 0, 0];
  }

  async moveToActive(token: string, _name?: string): Promise<unknown[]> {
    await this.waitUntilReady();
    const stashed = this.stash.shift();
    if (stashed) {
      return this.handOut(stashed, token);
    }
    const reply = (await this.send('EMQ.CLAIM', {}, token, this.lease, 'COUNT', 1, ...this.claimOpts)) as
      unknown[][] | null;
    if (!reply || reply.length === 0) {
      return NONE.slice();
    }
    return this.handOut({ id: String(reply[0][0]), token, entry: reply[0] }, token);
  }

  /**
   * Waits inside the server with `CLAIM … BLOCK`; a job it takes is kept and handed out by the
   * next moveToActive. The answer `{score: 0}` tells the worker to fetch now.
   */
  async waitForJob(blockTimeout: number): Promise<{ member: string; score: number } | null> {
    if (!this.blockingConn) {
      return null;
    }
    await this.waitUntilReady();
    const ms = Math.max(1, Math.ceil(blockTimeout * 1000));
    const token = `tkb:${randomUUID()}`;
    const p = this.blockingConn.call(
      ...this.build('EMQ.CLAIM', {}, token, this.lease, 'COUNT', 1, 'BLOCK', ms, ...this.claimOpts),
    );
    this.waiting = p;
    try {
      const reply = (await p) as unknown[][] | null;
      if (reply && reply.length > 0) {
        const id = String(reply[0][0]);
        if (this.closing) {
          await this.send('EMQ.REQUEUE', { job: id }, token);
          return null;
        }
        this.stash.push({ id, token, entry: reply[0] });
        return { member: id, score: 0 };
      }
      return null;
    } finally {
      this.waiting = undefined;
    }
  }

  /** Ends a `CLAIM … BLOCK` in flight with the empty reply; the blocking connection stays. */
  async disconnectBlocking(_wait = true): Promise<void> {
    const waiting = this.waiting;
    if (this.blockingConn && waiting && this.blockingId !== undefined) {
      await this.conn.client('UNBLOCK', this.blockingId, 'TIMEOUT').catch(() => undefined);
      await waiting.catch(() => undefined);
    }
  }

  async reconnectBlocking(): Promise<void> {
    if (this.blockingConn && this.blockingConn.status === 'end') {
      await this.blockingConn.connect().catch(() => undefined);
    }
  }

  protected async returnStash(): Promise<void> {
    const stash = this.stash.splice(0);
    for (const c of stash) {
      await this.send('EMQ.REQUEUE', { job: c.id }, c.token);
    }
  }

  // ---------------------------------------------------------------- leases

  async extendLock(jobId: string, token: string, duration: number): Promise<number> {
    const id = await this.resolve(jobId);
    if (!id) {
      return 0;
    }
    try {
      await this.send('EMQ.EXTEND', { job: id }, this.tokenFor(id, token), Math.max(1, Math.floor(duration)));
      return 1;
    } catch (err) {
      // Not held by this token (any more): BullMQ's 0. Anything else (a refusal, a lost
      // connection) is an error, not a lost lock.
      if (notHeld(err)) {
        return 0;
      }
      throw err;
    }
  }

  async extendLocks(jobIds: string[], tokens: string[], duration: number): Promise<string[]> {
    if (jobIds.length === 0) {
      return [];
    }
    const args: Arg[] = [];
    const ids: string[] = [];
    for (let i = 0; i < jobIds.length; i++) {
      const id = (await this.resolve(jobIds[i])) ?? jobIds[i];
      if (!isBranded(id)) {
        continue;
      }
      ids.push(jobIds[i]);
      args.push(id, this.tokenFor(id, tokens[i]));
    }
    const failed = jobIds.filter(j => !ids.includes(j));
    // EXTENDS takes at most 250 pairs a call (EMQARG beyond): a worker of concurrency 500
    // renews in several calls, pipelined.
    if (ids.length > 0) {
      const p = this.conn.pipeline();
      for (let i = 0; i < ids.length; i += EXTEND_BATCH) {
        p.call(
          ...this.build(
            'EMQ.EXTENDS',
            {},
            Math.max(1, Math.floor(duration)),
            ...args.slice(2 * i, 2 * (i + EXTEND_BATCH)),
          ),
        );
      }
      const res = (await p.exec()) ?? [];
      res.forEach(([err, reply], b) => {
        const chunk = ids.slice(b * EXTEND_BATCH, (b + 1) * EXTEND_BATCH);
        if (err) {
          failed.push(...chunk);
          return;
        }
        (reply as unknown[]).forEach((r, i) => {
          if (Number(r) === 0) {
            failed.push(chunk[i]);
          }
        });
      });
    }
    return failed;
  }

  // ---------------------------------------------------------------- finishing

  /**
   * BullMQ's error for a finish the module refused, by what BullMQ checks first: a worker's
   * token (`token`, not '0') finds the job held by another (`Lock mismatch`) or not held at
   * all (`Missing lock`); without a token only the state is checked.
   */
  private finishError(
    err: unknown,
    jobId: string,
    state: string | null,
    cmd: string,
    token: string | undefined,
  ): Error {
    const code = errCode(err);
    if (code === 'EMQNOJOB') {
      return new Error(`Missing key for job ${jobId}. ${cmd}`);
    }
    if (code === 'EMQLEASE') {
      const worker = token !== undefined && token !== '0';
      if (worker && state === 'active') {
        return new Error(`Lock mismatch for job ${jobId}. Cmd ${cmd} from active`);
      }
      if (!worker && state && state !== 'active') {
        return new Error(`Job ${jobId} is not in the active state. ${cmd}`);
      }
      return new Error(`Missing lock for job ${jobId}. ${cmd}`);
    }
    return err as Error;
  }

  /**
   * After a finish: the next job when asked for, and BullMQ's `drained` event when nothing is
   * ready or active any more. The module writes `drained` after a COMPLETE itself (`ECHO`),
   * not after the other moves.
   */
  private async next(token: string, fetchNext: boolean, completed = false): Promise<unknown[] | undefined> {
    const next = fetchNext ? await this.moveToActive(token) : undefined;
    if (!next?.[0] && !completed) {
      const c = await this.counts();
      if (c.wait + c.prio + c.active === 0) {
        await this.conn.xadd(this.key('events'), 'MAXLEN', '~', 10000, '*', 'event', 'drained');
      }
    }
    return next;
  }

  async moveToCompleted<T, R, N extends string>(
    job: MinimalJob<T, R, N>,
    returnValue: R,
    removeOnComplete: boolean | number | KeepJobs,
    token: string,
    fetchNext: boolean,
  ): Promise<{ result: unknown[] | undefined; finishedOn: number }> {
    const jobId = job.id as string;
    const id = await this.mustResolve(jobId, 'moveToFinished');
    const keep = removeOnComplete ?? this.opts.removeOnComplete;
    const rv = JSON.stringify(returnValue === undefined ? null : returnValue);
    const sent = this.tokenFor(id, token);
    if (fetchNext && this.stash.length === 0) {
      // Finish and fetch in one atomic call; the next job is claimed with the same token.
      let done: Finished;
      try {
        done = await this.finishNext(id, sent, rv, [...keepArgs(keep), 'ECHO', ...this.metrics, ...this.claimOpts]);
      } catch (err) {
        throw this.finishError(err, jobId, await this.stateOf(id), 'moveToFinished', token);
      }
      const finishedOn = Date.now();
      this.letGoOf(id, sent);
      if (done.job) {
        return {
          result: await this.handOut({ id: String(done.job[0]), token: done.token, entry: done.job }, token),
          finishedOn,
        };
      }
      return { result: NONE.slice(), finishedOn };
    }
    try {
      await this.send('EMQ.COMPLETE', { job: id }, sent, rv, ...keepArgs(keep), 'ECHO', ...this.metrics);
    } catch (err) {
      throw this.finishError(err, jobId, await this.stateOf(id), 'moveToFinished', token);
    }
    const finishedOn = Date.now();
    this.letGoOf(id, sent);
    // Without fetchNext BullMQ answers an empty entry.
    return { result: (await this.next(token, fetchNext, true)) ?? [], finishedOn };
  }

  /**
   * A finish-and-fetch, sent with the others of this turn on the same connection, queue and
   * options (any worker's): one TRA.COMPLETESNEXT for many (up to `FINISHES_MAX`),
   * TRA.COMPLETENEXT for one. Jobs that ended together are finished in one call, and the
   * server pays once for what every call pays (the fence, the queue's keys, its limits).
   * Settles with the next job and its module token, or fails as TRA.COMPLETENEXT would for
   * this job alone.
   */
  private finishNext(id: string, token: string, rv: string, tail: Arg[]): Promise<Finished> {
    return new Promise((resolve, reject) => {
      const entry: Finishing = { id, token, rv, resolve, reject };
      const waiting = finishing.get(this.conn) ?? new Map<string, Finishing[]>();
      finishing.set(this.conn, waiting);
      // The call's keys are the queue's and its lease is an argument: both part of the key.
      const key = [this.key('wait'), this.lease, ...tail].join('\u0000');
      let batch = waiting.get(key);
      if (!batch) {
        const mine: Finishing[] = [];
        batch = mine;
        waiting.set(key, mine);
        process.nextTick(() => {
          if (waiting.get(key) === mine) {
            waiting.delete(key);
            this.sendFinishes(mine, tail);
          }
        });
      }
      batch.push(entry);
      if (batch.length >= FINISHES_MAX) {
        waiting.delete(key);
        this.sendFinishes(batch, tail);
      }
    });
  }

  private sendFinishes(batch: Finishing[], tail: Arg[]): void {
    gather(this.conn, batch.length);
    const [first] = batch;
    if (batch.length === 1) {
      this.send('TRA.COMPLETENEXT', { job: first.id }, first.token, first.rv, this.lease, ...tail).then(reply => {
        const [done, jobs] = reply as [number, unknown];
        first.resolve({
          done: Number(done),
          token: first.token,
          job: Array.isArray(jobs) ? (jobs[0] as unknown[]) : undefined,
        });
      }, first.reject);
      return;
    }
    const pairs = batch.flatMap(e => [e.token, e.rv]);
    // The jobs fetched are claimed under a token of the backend's own: each is then held by
    // its caller's BullMQ token alone (`tokenFor`), not by another caller's.
    const claim = `tkf:${randomUUID()}`;
    this.send('TRA.COMPLETESNEXT', { rows: batch.map(e => e.id) }, ...pairs, claim, this.lease, ...tail).then(
      reply => {
        const [codes, jobs] = reply as [number[], unknown];
        const next = Array.isArray(jobs) ? [...(jobs as unknown[][])] : [];
        batch.forEach((e, i) => {
          const code = Number(codes[i]);
          if (code >= 0) {
            e.resolve({ done: code, token: claim, job: next.shift() });
          } else {
            // What TRA.COMPLETENEXT refuses this job with.
            e.reject(new Error(code === -2 ? `EMQNOJOB ${e.id}` : `EMQLEASE ${e.id}`));
          }
        });
      },
      () => {
        // Refused whole (nothing written): each alone, so that one job's refusal (its result
        // too large, say) stays its own.
        batch.forEach(e => {
          this.sendFinishes([e], tail);
        });
      },
    );
  }

  /** EMQ.FAIL with the decision BullMQ made (`extra`) and the stack, which the row keeps. */
  private async fail(
    jobId: string,
    token: string | undefined,
    reason: string | undefined,
    extra: Arg[],
    stack: string | undefined,
    cmd: string,
  ): Promise<string> {
    const id = await this.mustResolve(jobId, cmd);
    const sent = this.tokenFor(id, token);
    try {
      const reply = await this.send(
        'EMQ.FAIL',
        { job: id },
        sent,
        reason ?? '',
        ...extra,
        ...(stack !== undefined ? ['STACK', stack] : []),
      );
      this.letGoOf(id, sent);
      return String(reply);
    } catch (err) {
      throw this.finishError(err, jobId, await this.stateOf(id), cmd, token);
    }
  }

  async moveToFailed<T, R, N extends string>(
    job: MinimalJob<T, R, N>,
    failedReason: string,
    removeOnFail: boolean | number | KeepJobs,
    token: string,
    fetchNext: boolean,
    fieldsToUpdate?: Record<string, unknown>,
  ): Promise<{ result: unknown[] | undefined; finishedOn: number }> {
    const keep = removeOnFail ?? this.opts.removeOnFail;
    await this.fail(
      job.id as string,
      token,
      failedReason,
      [...keepArgs(keep), 'FINAL', ...this.metrics],
      fieldsToUpdate?.stacktrace as string | undefined,
      'moveToFinished',
    );
    const finishedOn = Date.now();
    // BullMQ's retries-exhausted: the last attempt failed (not an early UnrecoverableError).
    if (job.attemptsMade + 1 >= (job.opts?.attempts ?? 1)) {
      await this.conn.xadd(
        this.key('events'),
        'MAXLEN',
        '~',
        10000,
        '*',
        'event',
        'retries-exhausted',
        'jobId',
        job.id as string,
        'attemptsMade',
        job.attemptsMade + 1,
      );
    }
    return { result: await this.next(token, fetchNext), finishedOn };
  }

  /**
   * A move to delayed. With `fieldsToUpdate` it is a retry after `delay` ms as BullMQ's
   * client decided it (custom backoff, jitter): FAIL DELAY, an attempt counted by the server
   * whatever the job's own BACKOFF says. Without, EMQ.DELAY parks the job and counts nothing.
   */
  async moveToDelayed(
    jobId: string,
    _timestamp: number,
    delay: number,
    token?: string,
    opts?: MoveToDelayedOpts,
  ): Promise<unknown[]> {
    const fields = opts?.fieldsToUpdate as Record<string, unknown> | undefined;
    if (fields) {
      await this.fail(
        jobId,
        token,
        (fields.failedReason as string | undefined) ?? '',
        ['DELAY', `+${Math.max(0, Math.floor(delay))}`],
        fields.stacktrace as string | undefined,
        'moveToDelayed',
      );
    } else {
      const id = await this.mustResolve(jobId, 'moveToDelayed');
      const sent = this.tokenFor(id, token);
      try {
        await this.send('EMQ.DELAY', { job: id }, sent, `+${Math.max(0, Math.floor(delay))}`);
      } catch (err) {
        throw this.finishError(err, jobId, await this.stateOf(id), 'moveToDelayed', token);
      }
      this.letGoOf(id, sent);
    }
    // BullMQ answers a move to delayed with the next job, or [] when none is fetched.
    if (opts?.fetchNext && token) {
      const next = (await this.next(token, true)) ?? [];
      return next[0] ? next : [];
    }
    return [];
  }

  async moveToWaitingChildren(_jobId: string, _token: string, _opts?: MoveToWaitingChildrenOpts): Promise<boolean> {
    throw new NotSupportedError('flows (waiting for children)');
  }

  async moveJobFromActiveToWait(jobId: string, token?: string): Promise<number> {
    const id = await this.mustResolve(jobId, 'moveJobFromActiveToWait');
    const sent = this.tokenFor(id, token);
    try {
      await this.send('EMQ.REQUEUE', { job: id }, sent);
    } catch (err) {
      throw this.finishError(err, jobId, await this.stateOf(id), 'moveJobFromActiveToWait', token);
    }
    this.letGoOf(id, sent);
    // BullMQ answers with the time its limiter still holds the queue: the worker waits that long.
    return Math.max(0, (await this.limits()).ttl ?? 0, await this.manualTtl());
  }

  /** BullMQ's immediate retry: FAIL RETRY [LIFO], ready now whatever the backoff. */
  async retryJob(jobId: string, lifo: boolean, token?: string, opts?: RetryJobOpts): Promise<void> {
    const fields = opts?.fieldsToUpdate as Record<string, unknown> | undefined;
    await this.fail(
      jobId,
      token,
      (fields?.failedReason as string | undefined) ?? '',
      ['RETRY', ...(lifo ? ['LIFO'] : [])],
      fields?.stacktrace as string | undefined,
      'retryJob',
    );
  }

  /**
   * The module's upkeep reclaims expired leases itself, so a worker sweeps nothing. Its check
   * only reports the stalls upkeep made since the last check (the `stalled` events), so that
   * the worker's own `stalled` event fires: one worker per interval, as BullMQ's lock does.
   */
  async moveStalledJobsToWait(): Promise<string[]> {
    const interval = Math.max(1, Math.floor(this.opts.stalledInterval ?? 30000));
    const lock = await this.conn.set(this.key('b:stalled-check'), '1', 'PX', interval, 'NX');
    if (lock !== 'OK') {
      return [];
    }
    const seenKey = this.key('b:stalled-seen');
    const seen = await this.conn.get(seenKey);
    // The first check looks back one lease: stalls older than that were somebody else's to see.
    let from = seen ? `(${seen}` : `${Math.max(0, Date.now() - this.lease - interval)}-0`;
    // Read in pages: one XRANGE of the whole stream would hold the server for milliseconds.
    const ids: string[] = [];
    let last: string | undefined;
    for (let page = 0; page < STALL_PAGES; page++) {
      const entries = await this.conn.xrange(this.key('events'), from, '+', 'COUNT', STALL_PAGE);
      for (const [, f] of entries) {
        if (f[0] === 'event' && f[1] === 'stalled' && f[2] === 'id') {
          ids.push(f[3]);
        }
      }
      if (entries.length > 0) {
        last = entries[entries.length - 1][0];
        from = `(${last}`;
      }
      if (entries.length < STALL_PAGE) {
        break;
      }
    }
    if (last === undefined) {
      return [];
    }
    await this.conn.set(seenKey, last);
    return this.external(ids);
  }
}
