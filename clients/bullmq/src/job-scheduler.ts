// The backend's job schedulers, as BullMQ's JobScheduler makes them: the server keeps each
// scheduler and makes its iterations by its own clock (TRA.SCHEDULER, TRA.SCHEDULERS).
import type { JobsOptions, RepeatableOptions } from 'bullmq';
import { type Arg, backoffWords, jobName } from './commands.js';
import { optsBlob } from './job-data.js';
import { NotSupportedError } from './queue-base.js';
import { QueueMethods } from './queue.js';
import { errCode, type Fields, pairs, replies } from './reply.js';

export abstract class JobSchedulerMethods extends QueueMethods {
  /**
   * TRA.SCHEDULER SET: the server keeps the scheduler and makes its iterations by its own
   * clock (the pending one a delayed job `repeat:<id>:<ms>`), whether or not a worker runs.
   * BullMQ's client-side time (`nextMillis`) is not sent: the server computes the first time
   * from the rule; only a pattern's `immediately` shows in it (the client's strategy answers
   * now for it), and becomes IMMEDIATELY.
   */
  async addJobScheduler(
    id: string,
    nextMillis: number,
    templateData: string,
    templateOpts: JobsOptions,
    opts: RepeatableOptions,
  ): Promise<[string, number]> {
    await this.waitUntilReady();
    if (this.opts.settings?.repeatStrategy) {
      throw new NotSupportedError('a custom repeatStrategy (the server computes the iteration times)');
    }
    const rule: Arg[] = [];
    if (opts.every) {
      const every = Math.max(1, Math.floor(Number(opts.every)));
      rule.push('EVERY', every);
      const offset = Math.floor(Number(opts.offset ?? 0)) % every;
      if (offset > 0) {
        rule.push('OFFSET', offset);
      }
    } else if (opts.pattern) {
      rule.push('PATTERN', opts.pattern);
      if (opts.tz) {
        rule.push('TZ', opts.tz);
      }
      if (!opts.startDate && nextMillis <= Date.now()) {
        rule.push('IMMEDIATELY');
      }
    }
    if (opts.startDate) {
      rule.push('START', Math.floor(Number(opts.startDate)));
    }
    if (opts.endDate) {
      rule.push('END', Math.floor(Number(opts.endDate)));
    }
    if (opts.limit) {
      rule.push('LIMIT', Math.floor(Number(opts.limit)));
    }
    const name = opts.name ?? id;
    const { data, extra } = this.templateParts(name, templateData, templateOpts, opts);
    const restarted = opts.pattern ? null : await this.restartedEvery(id, rule);
    const res =
      (await this.conn
        .pipeline()
        .call(...this.build('TRA.SCHEDULER', { sched: id }, 'SET', ...rule, 'JOB', jobName(name), data, ...extra))
        .time()
        .exec()) ?? [];
    const [setErr, set] = res[0] ?? [null, null];
    if (setErr) {
      if (errCode(setErr) === 'EMQSTATE' && /already exists/.test(setErr.message)) {
        // A pattern's time whose iteration is still held: BullMQ's words for its refusal.
        throw new Error('Cannot create job scheduler iteration - job ID already exists. addJobScheduler');
      }
      throw new Error(`${setErr.message}. addJobScheduler`);
    }
    const [jobId, time] = set as [string, number];
    if (restarted) {
      await this.dropPreviousIteration(id, restarted, String(jobId));
    }
    const at = Number(time);
    if (res[1]?.[0]) {
      throw res[1][0];
    }
    const [sec, usec] = (res[1]?.[1] as [string, string] | undefined) ?? ['0', '0'];
    const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    if (at <= now) {
      // An iteration due now is ready at once, as BullMQ adds it to wait (the server makes it
      // delayed and promotes it at its next pass).
      try {
        await this.send('EMQ.PROMOTE', { job: String(jobId) });
      } catch (err) {
        if (errCode(err) !== 'EMQSTATE' && errCode(err) !== 'EMQNOJOB') {
          throw err;
        }
      }
    }
    return [`repeat:${id}:${at}`, Math.max(0, at - now)];
  }

  /**
   * BullMQ's upsert of an `every` scheduler with a new interval or phase starts it afresh: its
   * iteration not yet run is replaced by one due now, the count kept. The module's SET does
   * that for the pending iteration. Its predecessor may still wait as well: the server made
   * the pending one at its own time with no worker, where BullMQ would have made no
   * successor before a worker took the predecessor. So after SET, the iteration at the scheduler's time
   * read before it, or one interval earlier, that still waits to run (in wait, or
   * prioritized; a paused queue's is left) is removed. (Read before SET, the pending one may
   * have become the predecessor meanwhile: both times are tried.)
   */
  private async dropPreviousIteration(id: string, m: Fields, made: string): Promise<void> {
    const times = [Number(m.next), Number(m.next) - Number(m.every)];
    const ids = (await Promise.all(times.map(t => this.resolve(`repeat:${id}:${t}`)))).filter(
      (j): j is string => !!j && j !== made,
    );
    if (ids.length === 0) {
      return;
    }
    const p = this.conn.pipeline().hget(this.key('meta'), 'paused');
    for (const j of ids) {
      p.hget(this.jobKey(j), 'st');
    }
    const res = await replies(p);
    const paused = !!res[0];
    for (let i = 0; i < ids.length; i++) {
      const state = res[i + 1] as string | null;
      if (state === 'prio' || (state === 'wait' && !paused)) {
        try {
          await this.send('TRA.REMOVE', { job: ids[i] });
        } catch (err) {
          if (errCode(err) !== 'EMQSTATE') {
            throw err;
          }
        }
      }
    }
  }

  /** The scheduler as it is, when an upsert gives its `every` a new interval or phase. */
  private async restartedEvery(id: string, rule: Arg[]): Promise<Fields | null> {
    const m = await this.schedulerRow(id);
    if (!m?.every || !m.next) {
      return null;
    }
    const every = Number(rule[1]);
    const offset = rule[2] === 'OFFSET' ? Number(rule[3]) : 0;
    return Number(m.every) === every && Number(m.offset ?? 0) === offset ? null : m;
  }

  /**
   * A scheduler's job template: data, and ENQUEUE's words from the template's options; the
   * blob keeps the options and the repeat rule, from which each iteration's BullMQ options
   * are made when it is read.
   */
  private templateParts(
    name: string,
    data: string,
    templateOpts: JobsOptions | undefined,
    opts: RepeatableOptions,
  ): { data: string; extra: Arg[] } {
    const given = templateOpts as Record<string, unknown> | undefined;
    for (const [opt, feature] of [
      ['parent', 'flows (the parent option)'],
      ['deduplication', 'deduplication in a job scheduler template'],
    ] as const) {
      if (given?.[opt]) {
        throw new NotSupportedError(feature);
      }
    }
    const o = { ...(templateOpts ?? {}) };
    const extra: Arg[] = [];
    if (o.priority) {
      extra.push('PRIORITY', o.priority);
    }
    if (o.attempts && o.attempts > 1) {
      extra.push('ATTEMPTS', o.attempts);
      extra.push(...backoffWords(o.backoff));
    }
    const r: Record<string, unknown> = {};
    for (const k of ['every', 'pattern', 'tz', 'limit', 'startDate', 'endDate'] as const) {
      if (opts[k] !== undefined && opts[k] !== null) {
        r[k] = opts[k];
      }
    }
    // An iteration's `repeat` shows an offset only when there is one, as BullMQ's do.
    const offset = opts.every ? Math.floor(Number(opts.offset ?? 0)) % Math.max(1, Math.floor(Number(opts.every))) : 0;
    if (offset > 0) {
      r.offset = offset;
    }
    const blob: Record<string, unknown> = { o, r };
    if (jobName(name) !== name) {
      blob.n = name;
    }
    extra.push('OPTS', JSON.stringify(blob));
    return { data: data ?? '{}', extra };
  }

  /**
   * A worker's step after it took an iteration: BullMQ's client makes the next one here. The
   * server made it already — when the iteration's time came, or in the claim that took it
   * early — so this writes nothing.
   */
  async updateJobSchedulerNextMillis(): Promise<string | null> {
    return null;
  }

  /** TRA.SCHEDULER DEL; BullMQ's code: 0 removed, 1 there was none. */
  async removeJobScheduler(id: string): Promise<number> {
    await this.waitUntilReady();
    return Number(await this.send('TRA.SCHEDULER', { sched: id }, 'DEL')) === 1 ? 0 : 1;
  }

  /** One scheduler as TRA.SCHEDULERS GET answers it (null when there is none). */
  private async schedulerRow(id: string): Promise<Fields | null> {
    await this.waitUntilReady();
    const reply = await this.send('TRA.SCHEDULERS', {}, 'GET', id);
    return reply ? pairs(reply) : null;
  }

  /** A scheduler in the fields of BullMQ's scheduler hash, as its JobScheduler reads them. */
  private schedulerHash(m: Fields): Record<string, string> {
    const blob = optsBlob(m.opts);
    const out: Record<string, string> = {
      name: blob.n ?? String(m.name),
      ic: String(m.count ?? 1),
      offset: String(m.offset ?? 0),
    };
    const copy: [string, string][] = [
      ['limit', 'limit'],
      ['start', 'startDate'],
      ['end', 'endDate'],
      ['tz', 'tz'],
      ['pattern', 'pattern'],
      ['every', 'every'],
    ];
    for (const [from, to] of copy) {
      if (m[from] !== null && m[from] !== undefined) {
        out[to] = String(m[from]);
      }
    }
    if (m.data && m.data !== '{}') {
      out.data = String(m.data);
    }
    if (blob.o && Object.keys(blob.o).length > 0) {
      out.opts = JSON.stringify(blob.o);
    }
    return out;
  }

  async getJobScheduler(id: string): Promise<[string[] | null, string | null]> {
    const m = await this.schedulerRow(id);
    if (!m) {
      return [null, null];
    }
    return [
      Object.entries(this.schedulerHash(m)).flat(),
      m.next === null || m.next === undefined ? null : String(m.next),
    ];
  }

  async isJobScheduler(id: string): Promise<boolean> {
    return (await this.schedulerRow(id)) !== null;
  }

  async getJobSchedulerData(key: string): Promise<Record<string, string>> {
    const m = await this.schedulerRow(key);
    return m ? this.schedulerHash(m) : {};
  }

  /** TRA.SCHEDULERS LIST by next time, as BullMQ's `[id, next, …]` (at most 1000 a call). */
  async getJobSchedulersRange(start: number, end: number, asc: boolean): Promise<string[]> {
    await this.waitUntilReady();
    const list = (await this.send('TRA.SCHEDULERS', {}, 'LIST', start, end, ...(asc ? [] : ['DESC']))) as
      unknown[] | null;
    return (list ?? []).flatMap(r => {
      const m = pairs(r);
      return [String(m.id), String(m.next)];
    });
  }

  async getJobSchedulersCount(): Promise<number> {
    await this.waitUntilReady();
    return Number(await this.send('TRA.SCHEDULERS', {}, 'COUNT'));
  }
}
