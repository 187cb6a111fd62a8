// Moving a queue's pending work from another BullMQ store (BullMQ's own Redis backend, as a
// team runs it today) to trafikey, through BullMQ's public Queue calls on both sides.

/** A job as `getJobs` answers it: the facts a move needs. */
interface PendingJob {
  id?: string;
  name: string;
  data: unknown;
  opts: Record<string, unknown>;
  timestamp: number;
  delay: number;
  attemptsMade: number;
  processedOn?: number;
  parentKey?: string;
  repeatJobKey?: string;
}

/** A job scheduler as `getJobSchedulers` answers it. */
interface Scheduler {
  key: string;
  name: string;
  every?: number;
  pattern?: string;
  tz?: string;
  limit?: number;
  startDate?: number;
  endDate?: number;
  offset?: number;
  template?: { data?: unknown; opts?: Record<string, unknown> };
}

/** The calls of BullMQ's `Queue` a move makes: a queue of any backend has them. */
export interface MovableQueue {
  readonly name: string;
  isPaused(): Promise<boolean>;
  pause(): Promise<void>;
  getJobs(types?: unknown, start?: number, end?: number, asc?: boolean): Promise<unknown[]>;
  getJobCounts(...types: unknown[]): Promise<Record<string, number>>;
  remove(jobId: string): Promise<number>;
  addBulk(jobs: { name: string; data: unknown; opts?: unknown }[]): Promise<unknown[]>;
  getJobSchedulers(start?: number, end?: number, asc?: boolean): Promise<unknown[]>;
  upsertJobScheduler(id: string, repeat: unknown, template?: unknown): Promise<unknown>;
  removeJobScheduler(id: string): Promise<boolean>;
  getGlobalConcurrency(): Promise<number | null>;
  setGlobalConcurrency(concurrency: number): Promise<number>;
  getGlobalRateLimit(): Promise<{ max: number; duration: number } | null>;
  setGlobalRateLimit(max: number, duration: number): Promise<number>;
}

/** What a move did. */
export interface MoveReport {
  /** Jobs added to the new store and removed from the old one. */
  moved: number;
  /** Of those, jobs whose id was one of BullMQ's numbers: each moved as `bullmq-<number>`. */
  renamed: number;
  /** Job schedulers set up on the new store and removed from the old one. */
  schedulers: number;
  /** The move paused the old queue (it was running). */
  paused: boolean;
  /** Jobs still held by workers of the old store: they finish there. */
  active: number;
  /** Pending jobs that stay on the old store, and why. */
  left: { id: string; why: string }[];
}

export interface MoveOptions {
  /** Jobs read, added and removed per step (1 to 1 000; default 250). */
  batch?: number;
}

/** The states whose jobs move, in the order a worker would take them (a paused queue's jobs wait in `wait`). */
const STATES = ['wait', 'prioritized', 'delayed'] as const;

/** BullMQ's own ids are numbers, which BullMQ refuses as a custom id. */
function isCounterId(id: string): boolean {
  return `${parseInt(id, 10)}` === id;
}

/** The id a job keeps on the new store: its own, or `bullmq-<n>` for BullMQ's number n. */
export function movedId(id: string): string {
  return isCounterId(id) ? `bullmq-${id}` : id;
}

/**
 * What becomes of a pending job: it moves, or it goes (an iteration of a scheduler that moved:
 * the scheduler makes its own on the new store), or it stays, with the reason (trafikey has no
 * flows; a legacy repeatable job's iteration has no scheduler to move).
 */
function fate(job: PendingJob, schedulers: Set<string>): { stays?: string; goes?: true } {
  if (job.parentKey || job.opts?.parent) {
    return { stays: 'a child of a flow (trafikey has no flows yet)' };
  }
  if (job.repeatJobKey) {
    return schedulers.has(job.repeatJobKey)
      ? { goes: true }
      : { stays: 'an iteration of a repeatable job that is not a job scheduler' };
  }
  return {};
}

/**
 * When a delayed job falls due: its delayed set's score on BullMQ's Redis store (the due time
 * times 4 096, plus an order), read through the store's own client; else its time plus its
 * delay, or, for a retry, its last start plus its backoff.
 */
async function dueTimes(from: MovableQueue, jobs: PendingJob[]): Promise<number[]> {
  const guess = (j: PendingJob) => (j.attemptsMade > 0 && j.processedOn ? j.processedOn : j.timestamp) + (j.delay || 0);
  const q = from as unknown as { keys?: { delayed?: string }; backend?: { client?: Promise<unknown> } };
  const key = q.keys?.delayed;
  const client = (await q.backend?.client?.catch(() => undefined)) as
    { zscore?: (k: string, m: string) => Promise<string | null> } | undefined;
  if (!key || typeof client?.zscore !== 'function') {
    return jobs.map(guess);
  }
  const zscore = client.zscore.bind(client);
  return Promise.all(
    jobs.map(async j => {
      const s = j.id === undefined ? null : await zscore(key, j.id);
      return s === null ? guess(j) : Math.floor(Number(s) / 0x1000);
    }),
  );
}

/** The options a job is added with on the new store, keeping what it was and what it had left. */
function movedOpts(job: PendingJob, id: string, due: number | undefined, now: number): Record<string, unknown> {
  // A job's place comes from the order of the move (LIFO already placed it), and its own
  // delay from when it falls due.
  const { jobId: _jobId, lifo: _lifo, delay: _delay, repeat: _repeat, repeatJobKey: _rjk, ...rest } = job.opts ?? {};
  const opts: Record<string, unknown> = { ...rest, jobId: id, timestamp: job.timestamp };
  if (due !== undefined && due > now) {
    opts.delay = due - now;
  }
  if (job.attemptsMade > 0 && typeof rest.attempts === 'number') {
    // The counters start again on the new store; the attempts left stay what they were.
    opts.attempts = Math.max(1, rest.attempts - job.attemptsMade);
  }
  return opts;
}

/** Copies the queue's global concurrency and global rate limit, when it has them. */
async function moveLimits(from: MovableQueue, to: MovableQueue): Promise<void> {
  const concurrency = await from.getGlobalConcurrency();
  if (concurrency !== null) {
    await to.setGlobalConcurrency(concurrency);
  }
  const rate = await from.getGlobalRateLimit();
  if (rate) {
    await to.setGlobalRateLimit(rate.max, rate.duration);
  }
}

/** Moves the job schedulers; answers the ids of those moved. */
async function moveSchedulers(from: MovableQueue, to: MovableQueue): Promise<Set<string>> {
  const moved = new Set<string>();
  for (const s of (await from.getJobSchedulers(0, -1, true)) as Scheduler[]) {
    const repeat: Record<string, unknown> = {};
    for (const k of ['every', 'pattern', 'tz', 'limit', 'startDate', 'endDate', 'offset'] as const) {
      if (s[k] !== undefined && s[k] !== null) {
        repeat[k] = s[k];
      }
    }
    await to.upsertJobScheduler(s.key, repeat, { name: s.name, data: s.template?.data, opts: s.template?.opts });
    // Its pending iteration goes too (see `fate`); the new store makes its own.
    await from.removeJobScheduler(s.key);
    moved.add(s.key);
  }
  return moved;
}

/**
 * Moves a queue's pending work from one BullMQ store to another: its jobs waiting (paused or
 * not), prioritized and delayed, its job schedulers, its global concurrency and global rate limit.
 * `from` is the queue on the old store (BullMQ's own `Queue`), `to` the same queue on trafikey
 * (`withTrafikey(withBackend).Queue`).
 *
 * The old queue is paused first, so that none of its workers takes a job while it moves; jobs
 * they already hold finish on the old store (`active` counts them), with their history. Jobs
 * move in the order a worker would take them, in batches: each batch is added to the new store
 * (under its own id, or `bullmq-<n>` for BullMQ's number n), then removed from the old one; a
 * delayed job keeps the time it falls due, a retried job the attempts it had left, and every
 * job its name, data, options and creation time. A move that stops half way can be run again:
 * a job already on the new store is not added twice (its id is taken), only removed from the
 * old one. A moved scheduler's pending iteration is removed, not moved: the scheduler makes its
 * own on the new store. A job that cannot move (a flow's, a legacy repeatable job's iteration)
 * stays and is listed in `left`.
 */
export async function moveFromBullMQ(
  from: MovableQueue,
  to: MovableQueue,
  options: MoveOptions = {},
): Promise<MoveReport> {
  const batch = Math.min(1000, Math.max(1, Math.floor(options.batch ?? 250)));
  const report: MoveReport = { moved: 0, renamed: 0, schedulers: 0, paused: false, active: 0, left: [] };
  if (!(await from.isPaused())) {
    await from.pause();
    report.paused = true;
  }
  await moveLimits(from, to);
  const schedulers = await moveSchedulers(from, to);
  report.schedulers = schedulers.size;
  const stays = new Set<string>();
  // A delayed job that falls due meanwhile turns up in `wait` again: passes until one moves nothing.
  for (let movedInPass = -1; movedInPass !== 0;) {
    movedInPass = 0;
    for (const state of STATES) {
      for (;;) {
        const page = (
          (await from.getJobs([state], 0, stays.size + batch - 1, true)) as (PendingJob | undefined)[]
        ).filter((j): j is PendingJob & { id: string } => !!j && j.id !== undefined && !stays.has(j.id));
        if (page.length === 0) {
          break;
        }
        const jobs: (PendingJob & { id: string })[] = [];
        for (const j of page) {
          const f = fate(j, schedulers);
          if (f.stays) {
            stays.add(j.id);
            report.left.push({ id: j.id, why: f.stays });
          } else if (f.goes) {
            if ((await from.remove(j.id)) !== 1) {
              stays.add(j.id);
              report.left.push({
                id: j.id,
                why: 'an iteration of a moved job scheduler, taken by a worker of the old store',
              });
            }
          } else {
            jobs.push(j);
          }
        }
        if (jobs.length === 0) {
          continue;
        }
        const due = state === 'delayed' ? await dueTimes(from, jobs) : [];
        const now = Date.now();
        const ids = jobs.map(j => movedId(j.id));
        const added = await to.addBulk(
          jobs.map((j, i) => ({ name: j.name, data: j.data, opts: movedOpts(j, ids[i], due[i], now) })),
        );
        // The batch's removals are sent together: the old store's client pipelines them.
        const removed = await Promise.all(jobs.map(j => from.remove(j.id)));
        for (const [i, j] of jobs.entries()) {
          if (removed[i] === 1) {
            report.moved++;
            movedInPass++;
            if (ids[i] !== j.id) {
              report.renamed++;
            }
            continue;
          }
          // A worker of the old store took it meanwhile (BullMQ refuses to remove a job a
          // worker holds): it runs there, so its copy goes. Only its own copy: an add that
          // deduplicated answers the job holding the id, which is another job.
          if ((added[i] as { id?: string } | undefined)?.id === ids[i]) {
            await to.remove(ids[i]);
          }
          stays.add(j.id);
          report.left.push({ id: j.id, why: 'taken by a worker of the old store during the move' });
        }
      }
    }
  }
  report.active = (await from.getJobCounts('active')).active ?? 0;
  return report;
}
