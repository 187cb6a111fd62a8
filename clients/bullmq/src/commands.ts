// The module commands the backend sends, each with its keys by role in the order the module
// declares them, and the one builder that turns a command's arguments into a call. Every
// `EMQ.*`/`TRA.*` call of the backend is built here: test/commands.test.ts checks the table
// against the loaded module's `COMMAND DOCS` and `COMMAND GETKEYS`, and that no other source
// file names a module command.
import type { KeepJobs, JobsOptions } from 'bullmq';

/** One argument of a call. */
export type Arg = string | number | Buffer;
/** A module call, ready for `conn.call(...c)` or a pipeline's `call(...c)`. */
export type Call = [string, ...Arg[]];

/** Keys of the queue itself, `emq:{Q}:<role>`. */
type QueueRole = 'wait' | 'prio' | 'active' | 'delayed' | 'completed' | 'failed' | 'meta' | 'events' | 'scheds';
/**
 * Keys the call names a thing of the queue by: `emq:{Q}:<role>:<name>` (a job's row or log, a
 * deduplication id, a job scheduler), and `set`, the state set the call names
 * (`emq:{Q}:completed` or `:failed`).
 */
type NamedRole = 'job' | 'log' | 'dedup' | 'sched' | 'set';
export type Role = QueueRole | NamedRole;

/**
 * A command's keys: `null` for a command without keys (`CMD arg…`); else `CMD numkeys key…
 * arg…`, and with a `tail`, `n` and n keys of that role right after the declared ones.
 */
export interface Spec {
  readonly keys: readonly Role[] | null;
  readonly tail?: 'job';
}

/** The commands, by name, with their keys as the module declares them (`COMMAND DOCS`). */
export const COMMANDS = {
  'EMQ.VERSION': { keys: null },
  'EMQ.ENQUEUE': { keys: ['job', 'wait', 'prio', 'events'] },
  'EMQ.SCHEDULE': { keys: ['job', 'delayed', 'events'] },
  'TRA.ADD': { keys: ['wait', 'prio', 'delayed', 'events'], tail: 'job' },
  'EMQ.CLAIM': { keys: ['wait', 'prio', 'active', 'delayed', 'meta', 'events'] },
  'EMQ.EXTEND': { keys: ['job', 'active'] },
  'EMQ.EXTENDS': { keys: ['active'] },
  'EMQ.COMPLETE': { keys: ['job', 'active', 'completed', 'events'] },
  'TRA.COMPLETENEXT': { keys: ['job', 'wait', 'prio', 'active', 'delayed', 'completed', 'meta', 'events'] },
  'TRA.COMPLETESNEXT': {
    keys: ['wait', 'prio', 'active', 'delayed', 'completed', 'meta', 'events'],
    tail: 'job',
  },
  'EMQ.FAIL': { keys: ['job', 'active', 'wait', 'prio', 'delayed', 'failed', 'events'] },
  'EMQ.DELAY': { keys: ['job', 'active', 'delayed', 'events'] },
  'EMQ.REQUEUE': { keys: ['job', 'active', 'wait', 'prio', 'events'] },
  'EMQ.REPROCESS': { keys: ['job', 'completed', 'failed', 'wait', 'prio', 'events'] },
  'EMQ.PROMOTE': { keys: ['job', 'delayed', 'wait', 'prio', 'events'] },
  'EMQ.RESCHEDULE': { keys: ['job', 'delayed', 'events'] },
  'TRA.PRIORITY': { keys: ['job', 'wait', 'prio', 'events'] },
  'TRA.SETDATA': { keys: ['job'] },
  'TRA.PROGRESS': { keys: ['job', 'active', 'events'] },
  'TRA.SETPROGRESS': { keys: ['job', 'events'] },
  'TRA.LOG': { keys: ['job', 'log'] },
  'TRA.ADDLOG': { keys: ['job', 'log'] },
  'TRA.REMOVE': { keys: ['job', 'wait', 'prio', 'active', 'delayed', 'completed', 'failed', 'events'] },
  'TRA.JOB': { keys: ['job'] },
  'TRA.COUNTS': { keys: ['wait', 'prio', 'active', 'delayed', 'completed', 'failed', 'meta'] },
  'TRA.DRAIN': { keys: ['wait', 'prio', 'delayed', 'events'] },
  'TRA.CLEAN': { keys: ['set', 'events'] },
  'TRA.OBLITERATE': { keys: ['wait', 'prio', 'active', 'delayed', 'completed', 'failed', 'meta', 'events'] },
  'TRA.LIMIT': { keys: ['meta'] },
  'TRA.LIMITS': { keys: ['meta', 'active'] },
  'TRA.DEDUP': { keys: ['dedup'] },
  'TRA.UNDEDUP': { keys: ['dedup'] },
  'TRA.SCHEDULER': { keys: ['sched', 'scheds', 'delayed', 'events'] },
  'TRA.SCHEDULERS': { keys: ['scheds'] },
} as const satisfies Record<string, Spec>;

export type Name = keyof typeof COMMANDS;

type RolesOf<N extends Name> = (typeof COMMANDS)[N]['keys'] extends readonly (infer R)[] ? R : never;

/**
 * What a call names beyond its queue: the name of each thing its keys name (a job id, a
 * scheduler id, a deduplication id, the state set), and the job ids of its tail (`rows`).
 */
export type Names<N extends Name> = { readonly [R in Extract<RolesOf<N>, NamedRole>]: string } & TailOf<N>;

type TailOf<N extends Name> = (typeof COMMANDS)[N] extends { tail: 'job' }
  ? { readonly rows: readonly string[] }
  : unknown;

const QUEUE_ROLES: readonly QueueRole[] = [
  'wait',
  'prio',
  'active',
  'delayed',
  'completed',
  'failed',
  'meta',
  'events',
  'scheds',
];

/** The builder of one queue's calls: its keys made once, the named ones per call. */
export class Commands {
  private readonly queueKeys = new Map<Role, string>();

  /** `base` is the queue's key base, `emq:{Q}`. */
  constructor(readonly base: string) {
    for (const r of QUEUE_ROLES) {
      this.queueKeys.set(r, `${base}:${r}`);
    }
  }

  /** The key of a named role: `job`, `log`, `dedup`, `sched` with the thing's name; `set` a state. */
  named(role: NamedRole, name: string): string {
    return role === 'set' ? `${this.base}:${name}` : `${this.base}:${role}:${name}`;
  }

  /** `name`'s call: numkeys, its keys in the module's order, its tail, then `args`. */
  build<N extends Name>(name: N, names: Names<N>, ...args: Arg[]): Call {
    const spec: Spec = COMMANDS[name];
    if (spec.keys === null) {
      return [name, ...args];
    }
    const call: Call = [name, spec.keys.length];
    // `Names<N>` gives each named role of `name` its name; read here by role.
    const given = names as Partial<Record<NamedRole, string>> & { readonly rows?: readonly string[] };
    for (const role of spec.keys) {
      call.push(this.queueKeys.get(role) ?? this.named(role as NamedRole, given[role as NamedRole] as string));
    }
    if (spec.tail !== undefined) {
      const rows = given.rows ?? [];
      call.push(rows.length);
      for (const id of rows) {
        call.push(this.named(spec.tail, id));
      }
    }
    for (const a of args) {
      call.push(a);
    }
    return call;
  }
}

// ---------------------------------------------------------------- argument words

/** KEEP/AGE arguments of COMPLETE and FAIL; BullMQ keeps everything unless told otherwise. */
export function keepArgs(keep: boolean | number | KeepJobs | undefined | null): Arg[] {
  if (keep === undefined || keep === false || keep === null) {
    return ['KEEP', -1];
  }
  if (keep === true) {
    return ['KEEP', 0];
  }
  if (typeof keep === 'number') {
    return ['KEEP', Math.max(0, Math.floor(keep))];
  }
  // KeepJobs is `{age, count?}` or `{count}`: read both as optional.
  const k: { count?: number; age?: number } = keep;
  const out: Arg[] = ['KEEP', k.count === undefined ? -1 : Math.max(0, k.count)];
  if (k.age !== undefined) {
    out.push('AGE', Math.max(0, Math.floor(k.age * 1000)));
  }
  return out;
}

/**
 * BACKOFF of a retried job. The server computes fixed and exponential backoff itself;
 * jitter and custom strategies have no server form (the client decides those retries).
 */
export function backoffWords(backoff: JobsOptions['backoff']): Arg[] {
  const bo = typeof backoff === 'number' ? { type: 'fixed', delay: backoff, jitter: undefined } : backoff;
  if (bo && !bo.jitter && typeof bo.delay === 'number' && bo.delay > 0) {
    if (bo.type === 'fixed') {
      return ['BACKOFF', 'FIXED', Math.floor(bo.delay)];
    }
    if (bo.type === 'exponential') {
      return ['BACKOFF', 'EXP', Math.floor(bo.delay)];
    }
  }
  return [];
}

/** BullMQ's max and duration as TRA.LIMIT RATE's arguments, within the module's ranges. */
export function rateArgs(max: unknown, duration: unknown): [number, number] {
  const clamp = (v: unknown, hi: number) => Math.min(hi, Math.max(1, Math.floor(Number(v) || 1)));
  return [clamp(max, 2 ** 31 - 1), clamp(duration, 2 ** 31)];
}

/** A job name within the module's 256 bytes (a longer one is kept in the options blob). */
export function jobName(name: string): string {
  return Buffer.byteLength(name) <= 256 ? name : '_';
}
