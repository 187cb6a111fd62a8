// The backend's calls on one job, as BullMQ's Job makes them: its data, progress and logs, its
// delay and priority, promoting, retrying and removing it. (The moves a worker makes with the
// jobs it holds are in worker.ts.)
import type { JobProgress, MinimalJob, RetryOptions } from 'bullmq';
import type { Arg } from './commands.js';
import { isBranded } from './keys.js';
import { NotSupportedError } from './queue-base.js';
import { QueueGetters } from './queue-getters.js';
import { errCode } from './reply.js';

export abstract class JobMethods extends QueueGetters {
  /** BullMQ's updateData: TRA.SETDATA replaces the row's data, whatever the job's state. */
  async updateData<T, R, N extends string>(job: MinimalJob<T, R, N>, data: T): Promise<void> {
    const id = await this.resolve(job.id as string);
    if (!id) {
      throw new Error(`Missing key for job ${String(job.id)}. updateData`);
    }
    try {
      await this.send('TRA.SETDATA', { job: id }, JSON.stringify(data === undefined ? null : data));
    } catch (err) {
      if (errCode(err) === 'EMQNOJOB') {
        throw new Error(`Missing key for job ${String(job.id)}. updateData`);
      }
      throw err;
    }
  }

  /** TRA.PROGRESS from the holder in this process, else TRA.SETPROGRESS (any client). */
  async updateProgress(jobId: string, progress: JobProgress): Promise<void> {
    const id = await this.mustResolve(jobId, 'updateProgress');
    const value = JSON.stringify(progress);
    const token = this.heldToken(id);
    if (token) {
      try {
        await this.send('TRA.PROGRESS', { job: id }, token, value, 'ECHO');
        return;
      } catch (err) {
        if (errCode(err) !== 'EMQLEASE') {
          throw err;
        }
      }
    }
    try {
      await this.send('TRA.SETPROGRESS', { job: id }, value, 'ECHO');
    } catch (err) {
      if (errCode(err) === 'EMQNOJOB') {
        throw new Error(`Missing key for job ${jobId}. updateProgress`);
      }
      throw err;
    }
  }

  /** TRA.LOG from the holder in this process, else TRA.ADDLOG (any client). */
  async addLog(jobId: string, logRow: string, keepLogs?: number): Promise<number> {
    const id = await this.mustResolve(jobId, 'addLog');
    const keep: Arg[] = keepLogs ? ['KEEP', keepLogs] : [];
    const token = this.heldToken(id);
    if (token) {
      try {
        return Number(await this.send('TRA.LOG', { job: id, log: id }, token, logRow, ...keep));
      } catch (err) {
        if (errCode(err) !== 'EMQLEASE') {
          throw err;
        }
      }
    }
    try {
      return Number(await this.send('TRA.ADDLOG', { job: id, log: id }, logRow, ...keep));
    } catch (err) {
      if (errCode(err) === 'EMQNOJOB') {
        throw new Error(`Missing key for job ${jobId}. addLog`);
      }
      throw err;
    }
  }

  async clearLogs(jobId: string, keepLogs?: number): Promise<void> {
    const id = await this.resolve(jobId);
    if (!id) {
      return;
    }
    if (keepLogs) {
      await this.conn.ltrim(this.key(`log:${id}`), -keepLogs, -1);
    } else {
      await this.conn.del(this.key(`log:${id}`));
    }
  }

  async changeDelay(jobId: string, delay: number): Promise<void> {
    const id = await this.mustResolve(jobId, 'changeDelay');
    try {
      await this.send('EMQ.RESCHEDULE', { job: id }, `+${Math.max(0, Math.floor(delay))}`);
    } catch (err) {
      if (errCode(err) === 'EMQSTATE') {
        throw new Error(`Job ${jobId} is not in the delayed state. changeDelay`);
      }
      throw err;
    }
  }

  /** TRA.PRIORITY moves a ready job between wait and prio as the value needs. */
  async changePriority(jobId: string, priority = 0, lifo = false): Promise<void> {
    await this.waitUntilReady();
    const id = await this.resolve(jobId);
    if (!id || !(await this.conn.exists(this.jobKey(id)))) {
      throw new Error(`Missing key for job ${jobId}. changePriority`);
    }
    try {
      await this.send('TRA.PRIORITY', { job: id }, Math.max(0, Math.floor(priority)), ...(lifo ? ['LIFO'] : []));
    } catch (err) {
      if (errCode(err) === 'EMQNOJOB') {
        throw new Error(`Missing key for job ${jobId}. changePriority`);
      }
      throw err;
    }
  }

  async remove(jobId: string, _removeChildren: boolean): Promise<number> {
    const id = await this.resolve(jobId);
    if (!id) {
      return 1;
    }
    // BullMQ keeps a scheduler's iteration that has not run yet from a direct removal (the
    // module allows it: that iteration is skipped); remove the scheduler instead.
    const [sched, st] = await this.conn.hmget(this.jobKey(id), 'rs', 'st');
    if (
      sched &&
      (st === 'wait' || st === 'prio' || st === 'delayed') &&
      (await this.conn.exists(this.key(`sched:${sched}`)))
    ) {
      throw new Error(`Job ${jobId} belongs to a job scheduler and cannot be removed directly. remove`);
    }
    try {
      await this.send('TRA.REMOVE', { job: id });
      // BullMQ's answer: 0 only for a job held by a worker; a job already gone is removed.
      return 1;
    } catch (err) {
      if (errCode(err) === 'EMQSTATE') {
        return 0;
      }
      throw err;
    }
  }

  async removeUnprocessedChildren(): Promise<void> {
    throw new NotSupportedError('flows (children)');
  }

  async removeChildDependency(): Promise<boolean> {
    throw new NotSupportedError('flows (child dependencies)');
  }

  /** TRA.UNDEDUP … IF job: releases the id only while that job holds it. */
  async removeDeduplicationKey(deduplicationId: string, jobId: string): Promise<number> {
    await this.waitUntilReady();
    const id = await this.resolve(jobId);
    if (!id || !isBranded(id)) {
      return 0;
    }
    return Number(await this.send('TRA.UNDEDUP', { dedup: deduplicationId }, 'IF', id));
  }

  async promote(jobId: string): Promise<void> {
    const id = await this.mustResolve(jobId, 'promote');
    try {
      await this.send('EMQ.PROMOTE', { job: id });
    } catch (err) {
      if (errCode(err) === 'EMQSTATE') {
        throw new Error(`Job ${jobId} is not in the delayed state. promote`);
      }
      if (errCode(err) === 'EMQNOJOB') {
        throw new Error(`Missing key for job ${jobId}. promote`);
      }
      throw err;
    }
  }

  /**
   * BullMQ's job.retry(): EMQ.REPROCESS FROM the state, keeping the attempt counters unless
   * told to reset them and the last progress report, LIFO from the job's options.
   */
  async retryFinishedJob<T, R, N extends string>(
    job: MinimalJob<T, R, N>,
    state: 'failed' | 'completed',
    opts?: RetryOptions,
  ): Promise<void> {
    const jobId = job.id as string;
    const id = await this.mustResolve(jobId, 'reprocessJob');
    const args: Arg[] = ['FROM', state];
    if (!opts?.resetAttemptsMade) {
      args.push('KEEPMADE');
    }
    if (!opts?.resetAttemptsStarted) {
      args.push('KEEPSTARTED');
    }
    if (job.opts?.lifo) {
      args.push('LIFO');
    }
    args.push('KEEPPROGRESS');
    try {
      await this.send('EMQ.REPROCESS', { job: id }, ...args);
    } catch (err) {
      if (errCode(err) === 'EMQNOJOB') {
        throw new Error(`Missing key for job ${jobId}. reprocessJob`);
      }
      if (errCode(err) === 'EMQSTATE') {
        throw new Error(`Job ${jobId} is not in the ${state} state. reprocessJob`);
      }
      throw err;
    }
  }
}
