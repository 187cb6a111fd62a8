// A job's row as the module answers it (TRA.JOB, or a claim's ROW), read as BullMQ's JobJson.
import type { JobJson, JobsOptions, JobProgress } from 'bullmq';
import { type Fields, num, pairs } from './reply.js';

/** The adapter's OPTS blob of a row or a scheduler: BullMQ's options, the add's time, the name (and a scheduler's repeat rule). */
export interface OptsBlob {
  o?: JobsOptions;
  ts?: unknown;
  n?: string;
  r?: Record<string, unknown>;
}

/** The blob of `opts`; {} when there is none or it is not the adapter's. */
export function optsBlob(opts: unknown): OptsBlob {
  try {
    const b: unknown = JSON.parse(typeof opts === 'string' ? opts : '{}');
    return b !== null && typeof b === 'object' ? (b as OptsBlob) : {};
  } catch {
    return {};
  }
}

/**
 * The options BullMQ gives a job given none: its Job sets `attempts` to 0 (and leaves keys
 * undefined, which JSON leaves out).
 */
export function isDefaultOpts(opts: JobsOptions): boolean {
  return opts.attempts === 0 && Object.entries(opts).every(([k, v]) => k === 'attempts' || v === undefined);
}

/**
 * A job's time (BullMQ's `timestamp`): the adapter's own, from the blob, else the row's
 * creation (a job another client made, an iteration a scheduler made).
 */
export function jobTime(blob: { ts?: unknown }, created: unknown): number | undefined {
  return typeof blob.ts === 'number' ? blob.ts : num(created);
}

/**
 * The row a claim with ROW brought (`[id name data attempt row]`): TRA.JOB's map less what
 * the entry carries (id, name, data) and the facts not set.
 */
export function claimedRow(entry: unknown[] | undefined): Fields | undefined {
  if (!entry || entry.length < 5) {
    return undefined;
  }
  // The claim leaves out what the worker knows: the state, and counters at their defaults
  // (read as such below).
  const row = pairs(entry[4], { state: 'active' });
  row.id = entry[0];
  row.name = entry[1];
  row.data = entry[2];
  return row;
}

type Text = string | null | undefined;

/**
 * A row as BullMQ's JobJson; `id` is the job's module id. The row holds the stack, the
 * alias (a custom id, which BullMQ knows the job by), the counters FAIL and REPROCESS keep,
 * and the name of the worker that took it (`worker`, from the claims' BY).
 */
export function jobJson(row: Fields, id: string): JobJson {
  const blob = optsBlob(row.opts);
  const opts = blob.o ?? {};
  const progressRaw = row.progress as Text;
  let progress: JobProgress = 0;
  if (progressRaw !== null && progressRaw !== undefined) {
    try {
      progress = JSON.parse(progressRaw) as JobProgress;
    } catch {
      progress = progressRaw;
    }
  }
  const state = String(row.state);
  const made = num(row.made) ?? 0;
  const started = num(row.started) ?? 0;
  let delay = 0;
  if (state === 'delayed') {
    // After a failed attempt the delay is the backoff the server applied (FIXED d, EXP d·2^(made−1)).
    const bo = /^(FIXED|EXP) (\d+)$/.exec(String(row.backoff ?? ''));
    if (made > 0 && bo) {
      delay = bo[1] === 'FIXED' ? Number(bo[2]) : Number(bo[2]) * 2 ** (made - 1);
    } else {
      delay = opts.delay ?? 0;
    }
  }
  const json: JobJson = {
    id: (row.alias as Text) ?? id,
    name: blob.n ?? String(row.name),
    data: (row.data as Text) ?? '{}',
    opts,
    progress,
    attemptsMade: made,
    attemptsStarted: started,
    stalledCounter: num(row.stalls) ?? 0,
    timestamp: jobTime(blob, row.created) ?? 0,
    delay,
    priority: num(row.priority) ?? 0,
    failedReason: (row.error as Text) ?? undefined,
    stacktrace: (row.stack as Text) ?? undefined,
    returnvalue: (row.result as Text) ?? undefined,
  } as JobJson;
  const processedOn = num(row.claimed);
  if (processedOn) {
    json.processedOn = processedOn;
  }
  const finishedOn = num(row.finished);
  if (finishedOn) {
    json.finishedOn = finishedOn;
  }
  if (row.worker) {
    json.processedBy = String(row.worker);
  }
  if (row.dedup) {
    json.deduplicationId = String(row.dedup);
  }
  if (row.scheduler) {
    // An iteration a scheduler made: BullMQ's options of one, from the template's blob and
    // the row's scheduler and time.
    const at = num(row.iteration) ?? 0;
    const createdAt = num(row.created) ?? at;
    const r = blob.r ?? {};
    const iterationDelay = Math.max(0, at - createdAt);
    const repeat: Record<string, unknown> = { ...r };
    const round = num(row.count);
    if (round) {
      // The iteration's number, kept in its row by the server (BullMQ's `repeat.count`).
      repeat.count = round;
    }
    json.opts = {
      ...opts,
      jobId: `repeat:${String(row.scheduler)}:${at}`,
      repeatJobKey: String(row.scheduler),
      timestamp: createdAt,
      delay: iterationDelay,
      repeat,
    } as JobsOptions;
    json.repeatJobKey = String(row.scheduler);
    if (state === 'delayed' && made === 0) {
      json.delay = iterationDelay;
    }
  }
  return json;
}
