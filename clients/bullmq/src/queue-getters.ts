// The backend's reads, as BullMQ's QueueGetters group them: a job's state and data, counts and
// ranges, logs, metrics, the queue's limits and meta.
import type { DependenciesOpts, JobJson, JobState, JobType } from 'bullmq';
import { claimedRow, jobJson } from './job-data.js';
import { NotSupportedError, QueueBase } from './queue-base.js';
import { type Fields, pairs, replies, view } from './reply.js';

const STATES: Record<string, JobState> = {
  wait: 'waiting',
  prio: 'prioritized',
  active: 'active',
  delayed: 'delayed',
  completed: 'completed',
  failed: 'failed',
};

/** BullMQ's meta fields that are the module's limits, by TRA.LIMITS's names. */
export const LIMIT_FIELDS: Record<string, string> = {
  concurrency: 'concurrency',
  max: 'rate-max',
  duration: 'rate-ms',
};

/**
 * The module's own fields of `meta` but `paused` (its limits in its own form, and the
 * `max-stalls` a worker sets), not shown as BullMQ's meta.
 */
const MODULE_FIELDS = ['rate', 'concurrency', 'hold-until', 'max-stalls'];

/** TRA.LIMITS's answer: the queue's limits and where they stand, by its names. */
export type Limits = Record<string, number | null | undefined>;

export abstract class QueueGetters extends QueueBase {
  async getState(jobId: string): Promise<JobState | 'unknown'> {
    const id = await this.resolve(jobId);
    const st = id ? await this.stateOf(id) : null;
    return (st && STATES[st]) || 'unknown';
  }

  async isFinished(jobId: string, returnValue = false): Promise<number | [number, string]> {
    const id = await this.resolve(jobId);
    const [st, r, e] = id ? await this.conn.hmget(this.jobKey(id), 'st', 'r', 'e') : [null, null, null];
    let out: [number, string];
    if (st === null) {
      out = [-1, `Missing key for job ${id ? this.jobKey(id) : this.toKey(jobId)}. isFinished`];
    } else if (st === 'completed') {
      out = [1, r ?? 'null'];
    } else if (st === 'failed') {
      out = [2, e ?? ''];
    } else {
      out = [0, ''];
    }
    return returnValue ? out : out[0];
  }

  /** Whether the queue's global concurrency is reached (leases run out but not yet reclaimed count). */
  async isMaxed(): Promise<boolean> {
    const l = await this.limits();
    return l.concurrency !== null && l.concurrency !== undefined && (l.active ?? 0) >= l.concurrency;
  }

  async isJobInState(state: string, jobId: string): Promise<boolean> {
    const s = await this.getState(jobId);
    if (state === 'wait' || state === 'waiting' || state === 'paused') {
      return s === 'waiting';
    }
    return s === state;
  }

  /**
   * The row as BullMQ's JobJson; `known` is the job's module id when the caller has it, and
   * `claimed` the row a claim with ROW brought (then nothing is read).
   */
  async getJobData(jobId: string, known?: string, claimed?: unknown[]): Promise<JobJson | undefined> {
    if (!this.checked) {
      await this.waitUntilReady();
    }
    const id = known ?? (await this.resolve(jobId));
    if (!id) {
      return undefined;
    }
    const row = claimedRow(claimed) ?? (await this.send('TRA.JOB', { job: id }));
    return row ? jobJson(view(row), id) : undefined;
  }

  /** TRA.DEDUP: the job holding a deduplication id, by the id BullMQ knows it by. */
  async getDeduplicationJobId(deduplicationId: string): Promise<string | null> {
    await this.waitUntilReady();
    const holder = (await this.send('TRA.DEDUP', { dedup: deduplicationId })) as string | null;
    return holder === null ? null : (await this.external([String(holder)]))[0];
  }

  async getJobLogs(jobId: string, start = 0, end = -1, asc = true): Promise<{ logs: string[]; count: number }> {
    const id = await this.resolve(jobId);
    if (!id) {
      return { logs: [], count: 0 };
    }
    const k = this.key(`log:${id}`);
    const res =
      (await this.conn
        .multi()
        .lrange(k, asc ? start : -(end + 1), asc ? end : -(start + 1))
        .llen(k)
        .exec()) ?? [];
    let logs = (res[0]?.[1] as string[] | undefined) ?? [];
    if (!asc) {
      logs = logs.reverse();
    }
    return { logs, count: Number(res[1]?.[1]) };
  }

  /**
   * BullMQ's rule on TRA.LIMITS: a manual limit's time while one runs; else, with `maxJobs`
   * or a rate limit set, the window's time once it holds that many jobs (0 before); with
   * neither, the window's time (-2 when none is open, as PTTL of a missing key).
   */
  async getRateLimitTtl(maxJobs?: number): Promise<number> {
    const l = await this.limits();
    const hold = l.hold ?? -2;
    if (hold > 0) {
      return hold;
    }
    const max = maxJobs || l['rate-max'];
    const window = l.window ?? -2;
    if (max) {
      return (l.count ?? 0) >= max && window > 0 ? window : 0;
    }
    return Math.max(window, await this.manualTtl());
  }

  /** TRA.COUNTS: the jobs of each state set, by the module's role names. */
  protected async counts(): Promise<Record<string, number>> {
    const m = pairs(await this.send('TRA.COUNTS', {}));
    const c: Record<string, number> = {};
    for (const k of Object.keys(m)) {
      c[k] = Number(m[k]);
    }
    return c;
  }

  async getCounts(types: JobType[]): Promise<number[]> {
    const c = await this.counts();
    // BullMQ 6 keeps a paused queue's jobs in wait: `paused` counts nothing.
    return types.map(t => {
      switch (t as string) {
        case 'wait':
        case 'waiting':
          return c.wait;
        case 'prioritized':
          return c.prio;
        case 'active':
          return c.active;
        case 'delayed':
          return c.delayed;
        case 'completed':
          return c.completed;
        case 'failed':
          return c.failed;
        default:
          return 0;
      }
    });
  }

  async getCountsPerPriority(priorities: number[]): Promise<number[]> {
    const p = this.conn.pipeline();
    for (const pr of priorities) {
      if (pr === 0) {
        p.llen(this.key('wait'));
      } else {
        p.zcount(this.key('prio'), pr, pr);
      }
    }
    return (await replies(p)).map(Number);
  }

  async getRanges(types: JobType[], start = 0, end = 1, asc = false): Promise<[string][]> {
    const p = this.conn.pipeline();
    // Each type's place among the pipeline's replies; null for a type that lists nothing.
    const slots: (number | null)[] = [];
    let sent = 0;
    const send = () => slots.push(sent++);
    for (const t of types as string[]) {
      const role = t === 'waiting' ? 'wait' : t === 'prioritized' ? 'prio' : t;
      if (role === 'wait') {
        // BullMQ's list convention: LRANGE from the newest end; ascending reads the other end.
        if (asc) {
          p.lrange(this.key('wait'), end === -1 ? 0 : -(end + 1), start === -1 ? 0 : -(start + 1));
        } else {
          p.lrange(this.key('wait'), start, end);
        }
        send();
      } else if (!['prio', 'active', 'delayed', 'completed', 'failed'].includes(role)) {
        // BullMQ 6 keeps a paused queue's jobs in wait, so `paused` lists nothing; nor does
        // any other type without a set of its own here.
        slots.push(null);
      } else {
        // Active is a set by deadline, BullMQ's a list, newest first, that its Queue reverses
        // when asked for ascending order: ascending ranks, reversed below, come out in order.
        if (asc) {
          p.zrange(this.key(role), start, end);
        } else {
          p.zrevrange(this.key(role), start, end);
        }
        send();
      }
    }
    const res = sent > 0 ? await replies(p) : [];
    // BullMQ's interface types each type's ids as a one-element tuple; they are the ids.
    const out: string[][] = [];
    for (let i = 0; i < types.length; i++) {
      const at = slots[i];
      let ids = at === null ? [] : ((res[at] as string[] | undefined) ?? []);
      if ((types[i] as string) === 'active' && asc) {
        ids = ids.slice().reverse();
      }
      out.push(await this.external(ids));
    }
    return out as [string][];
  }

  async getDependencyCounts(_jobId: string, types: string[]): Promise<number[]> {
    return types.map(() => 0);
  }

  async getDependencies(_jobId: string, _opts: DependenciesOpts): Promise<never> {
    throw new NotSupportedError('flows (dependencies)');
  }

  async getProcessedChildrenValues(): Promise<Record<string, string>> {
    return {};
  }

  async getIgnoredChildrenFailures(): Promise<Record<string, string>> {
    return {};
  }

  /**
   * The counter and series a worker's `metrics` option has the server keep (METRICS on the
   * finishes), in BullMQ's layout: `[count, prevTS, prevCount]`, the points from `start` to
   * `end` (newest first), and how many points there are.
   */
  async getMetrics(type: 'completed' | 'failed', start = 0, end = -1): Promise<[string[], string[], number]> {
    await this.waitUntilReady();
    const [meta, data, count] = await replies(
      this.conn
        .multi()
        .hmget(this.key(`metrics:${type}`), 'count', 'prevTS', 'prevCount')
        .lrange(this.key(`metrics:${type}:data`), start, end)
        .llen(this.key(`metrics:${type}:data`)),
    );
    return [meta as string[], data as string[], Number(count)];
  }

  async getClientList(): Promise<string[]> {
    return [String(await this.conn.client('LIST'))];
  }

  async paginate(): Promise<never> {
    throw new NotSupportedError('flows (paginated dependencies)');
  }

  // ---------------------------------------------------------------- limits and meta

  // BullMQ's global concurrency (`concurrency`) and global rate limit (`max`, `duration`) are
  // the module's limits of the queue, set with TRA.LIMIT and kept in `meta` in the module's
  // own form: the reads below take them from TRA.LIMITS.

  /** TRA.LIMITS: the queue's limits and where they stand now. */
  protected async limits(): Promise<Limits> {
    await this.waitUntilReady();
    const m: Fields = pairs(await this.send('TRA.LIMITS', {}));
    const out: Limits = {};
    for (const [k, v] of Object.entries(m)) {
      out[k] = v === null || v === undefined ? null : Number(v);
    }
    return out;
  }

  /** The time left of a manual limit set while no rate limit was (see setRateLimit), or -2. */
  protected async manualTtl(): Promise<number> {
    return this.conn.pttl(this.key('b:limiter'));
  }

  async getQueueMetaField(field: string): Promise<string | null> {
    return (await this.getQueueMetaFields([field]))[0];
  }

  async getQueueMetaFields(fields: string[]): Promise<(string | null)[]> {
    if (fields.length === 0) {
      return [];
    }
    await this.waitUntilReady();
    const own = fields.filter(f => !(f in LIMIT_FIELDS));
    const [vals, l] = await Promise.all([
      own.length ? this.conn.hmget(this.key('meta'), ...own) : Promise.resolve([] as (string | null)[]),
      fields.some(f => f in LIMIT_FIELDS) ? this.limits() : Promise.resolve({} as Limits),
    ]);
    let i = 0;
    return fields.map(f => {
      if (f in LIMIT_FIELDS) {
        const v = l[LIMIT_FIELDS[f]];
        return v === null || v === undefined ? null : String(v);
      }
      return vals[i++] ?? null;
    });
  }

  async getQueueMeta(): Promise<Record<string, string>> {
    const [raw, l] = await Promise.all([this.conn.hgetall(this.key('meta')), this.limits()]);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(raw)) {
      if (!MODULE_FIELDS.includes(k)) {
        out[k] = v;
      }
    }
    for (const [f, m] of Object.entries(LIMIT_FIELDS)) {
      const v = l[m];
      if (v !== null && v !== undefined) {
        out[f] = String(v);
      }
    }
    return out;
  }

  async hasQueueMetaField(field: string): Promise<boolean> {
    return (await this.conn.hexists(this.key('meta'), field)) === 1;
  }
}
