// A BullMQ 6 queue backend on Valkey with the trafikey module (wire echomq:6.0.0).
//
// Only bullmq's types are imported: this file also runs inside BullMQ's own source checkout,
// where a runtime `bullmq` would be a second copy of the classes.
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { Redis, type RedisOptions, type ChainableCommander } from 'ioredis';
import type {
  IQueueBackend,
  JobJson,
  JobsOptions,
  JobState,
  JobType,
  KeepJobs,
  MinimalJob,
  QueueBaseOptions,
  JobProgress,
  RetryOptions,
  RepeatableOptions,
  DependenciesOpts,
  MoveToDelayedOpts,
  MoveToWaitingChildrenOpts,
  ParentKeyOpts,
  RetryJobOpts,
} from 'bullmq';
import { escapeQueueName, isBranded, mintJobId } from './keys.js';

export const WIRE = 'echomq:6.0.0';
export const MODULE_MAJOR = 0;
/** CLAIM … BLOCK and the TRA.* administration verbs arrived in 0.2.0. */
export const MIN_MODULE_VERSION = [0, 2, 0] as const;
/** The claims' `BY worker`, recording a named worker in each row it takes. */
const BY_MODULE_VERSION = [0, 3, 1] as const;
/** The first module whose DEDUP takes KEEPLAST (keepLastIfActive in the server). */
const KEEPLAST_MODULE_VERSION = [0, 3, 2] as const;
const FENCE = '{emq}:version';

/** Thrown by every member that needs a module feature trafikey does not have yet. */
export class NotSupportedError extends Error {
  constructor(feature: string) {
    super(`trafikey-bullmq: ${feature} is not supported by the trafikey module yet`);
    this.name = 'NotSupportedError';
  }
}

/** The connection a backend accepts: ioredis options, or an ioredis client it duplicates. */
export type TrafikeyConnection = RedisOptions | Redis;

type KeysMap = Record<string, string>;
type Cmd = (string | number | Buffer)[];

/**
 * Jobs held in this process, by `<Q>\n<module id>`: the token the module knows (the claim's,
 * which for a job taken while waiting or fetched by a finish is not the one BullMQ gave the
 * job) and the token BullMQ gave it, which a caller must name to act as the holder.
 */
const held = new Map<string, { module: string; bull: string }>();
/** The longest metrics series the module keeps (one week of minutes). */
const METRICS_MAX = 10080;
/** TRA.ADD and EMQ.EXTENDS take at most 250 jobs a call (the module's 2 ms bound). */
const ADD_BATCH = 250;
const EXTEND_BATCH = 250;

const ROLES = ['wait', 'prio', 'active', 'delayed', 'completed', 'failed', 'meta', 'events'];

/** Events a stalled check reads per call, and the calls it makes at most. */
const STALL_PAGE = 500;
const STALL_PAGES = 20;

/** Keys the adapter keeps beside the module's; OBLITERATE does not know them. */
const ADAPTER_KEYS = ['alias', 'rev', 'progress', 'stack', 'pb', 'am', 'as', 'err', 'stalled-check', 'stalled-seen', 'dn', 'limiter'];

interface Claimed {
  id: string;
  token: string;
  /** The claim's entry with `ROW` (`[id name data attempt row]`): the job as claimed, no read needed. */
  entry?: unknown[];
}

/** A claimed job's row, as getJobData takes it instead of reading it. */
interface ClaimedRow {
  row: Record<string, any>;
  /**
   * The claiming worker's name, if it has one. A job handed to a worker without a name shows
   * none: reading the name an earlier attempt left would cost each job another round trip.
   */
  by?: string;
}

/**
 * The row a claim with ROW brought (`[id name data attempt row]`): TRA.JOB's map less what
 * the entry carries (id, name, data) and the facts not set.
 */
function claimedRow(entry: unknown[] | undefined, worker?: string): ClaimedRow | undefined {
  if (!entry || entry.length < 5) {
    return undefined;
  }
  // The claim leaves out what the worker knows: the state, and counters at their defaults
  // (read as such below).
  const row = pairs(entry[4], { state: 'active' });
  row.id = entry[0];
  row.name = entry[1];
  row.data = entry[2];
  return { row, by: worker };
}

/** A reply's field/value pairs (a flat array, or RESP3's map) added to `out`. */
function pairs(reply: unknown, out: Record<string, any> = {}): Record<string, any> {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) {
      out[String(reply[i])] = reply[i + 1];
    }
  } else if (reply && typeof reply === 'object') {
    Object.assign(out, reply);
  }
  return out;
}

/**
 * A reply's pairs to read, not to change: an object as it is (a row a claim brought is read
 * several times a job), an array copied into one.
 */
function view(reply: unknown): Record<string, any> {
  return reply && typeof reply === 'object' && !Array.isArray(reply) ? (reply as Record<string, any>) : pairs(reply);
}

/** TRA.JOB's `stack` and `alias` (module 0.3.0), null when absent. */
function row0Stack(reply: unknown): string | null {
  return reply ? ((view(reply).stack as string | null) ?? null) : null;
}
function row0Alias(reply: unknown): string | null {
  return reply ? ((view(reply).alias as string | null) ?? null) : null;
}

function num(v: unknown): number | undefined {
  if (v === null || v === undefined) {
    return undefined;
  }
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * The adapter's OPTS blob of a row or a scheduler: BullMQ's options, the add's time, the name
 * (and a scheduler's repeat rule); {} when there is none or it is not the adapter's.
 */
function optsBlob(opts: unknown): { o?: JobsOptions; ts?: unknown; n?: string; r?: Record<string, unknown> } {
  try {
    const b = JSON.parse(typeof opts === 'string' ? opts : '{}');
    return b !== null && typeof b === 'object' ? b : {};
  } catch {
    return {};
  }
}

/**
 * The options BullMQ gives a job given none: its Job sets `attempts` to 0 (and leaves keys
 * undefined, which JSON leaves out).
 */
function isDefaultOpts(opts: JobsOptions): boolean {
  return opts.attempts === 0 && Object.entries(opts).every(([k, v]) => k === 'attempts' || v === undefined);
}

/**
 * A job's time (BullMQ's `timestamp`): the adapter's own, from the blob, else the row's
 * creation (a job another client made, an iteration a scheduler made).
 */
function jobTime(blob: { ts?: unknown }, created: unknown): number | undefined {
  return typeof blob.ts === 'number' ? blob.ts : num(created);
}

function errCode(err: unknown): string {
  const msg = (err as Error)?.message ?? '';
  return msg.split(' ', 1)[0];
}

/**
 * A pipeline's (or transaction's) replies, in order. A command's error is thrown unless
 * `expected` accepts it (its reply is then `undefined`): a refused command (NOPERM, WRONGTYPE)
 * must not read as an empty answer, nor a refused write pass as done.
 */
async function replies(p: ChainableCommander, expected: (err: Error) => boolean = () => false): Promise<unknown[]> {
  const res = (await p.exec()) ?? [];
  return res.map(([err, reply]) => {
    if (err && !expected(err)) {
      throw err;
    }
    return err ? undefined : reply;
  });
}

/** A job that moved between reading its id and acting on it: a race a batch action passes over. */
const moved = (err: unknown) => errCode(err) === 'EMQSTATE' || errCode(err) === 'EMQNOJOB';

/** The job is not held by this token (any more): its lease lapsed, or it moved or is gone. */
const notHeld = (err: unknown) => errCode(err) === 'EMQLEASE' || moved(err);

function jsonOr(value: string | null | undefined, fallback: string): string {
  if (value === null || value === undefined) {
    return fallback;
  }
  try {
    JSON.parse(value);
    return value;
  } catch {
    return JSON.stringify(value);
  }
}

/** KEEP/AGE arguments of COMPLETE and FAIL; BullMQ keeps everything unless told otherwise. */
export function keepArgs(keep: boolean | number | KeepJobs | undefined): Cmd {
  if (keep === undefined || keep === false || keep === null) {
    return ['KEEP', -1];
  }
  if (keep === true) {
    return ['KEEP', 0];
  }
  if (typeof keep === 'number') {
    return ['KEEP', Math.max(0, Math.floor(keep))];
  }
  const k = keep as { count?: number; age?: number };
  const out: Cmd = ['KEEP', k.count === undefined ? -1 : Math.max(0, k.count)];
  if (k.age !== undefined) {
    out.push('AGE', Math.max(0, Math.floor(k.age * 1000)));
  }
  return out;
}

function parseVersion(v: string): number[] {
  return v.split(/[.-]/).slice(0, 3).map(x => parseInt(x, 10) || 0);
}

function versionAtLeast(v: string, min: readonly number[]): boolean {
  const p = parseVersion(v);
  for (let i = 0; i < 3; i++) {
    if ((p[i] ?? 0) !== min[i]) {
      return (p[i] ?? 0) > min[i];
    }
  }
  return true;
}

/** How long a closing connection's QUIT may wait behind a command still in flight. */
const QUIT_WAIT_MS = 1000;

/**
 * Ends a connection: QUIT, answered once the server has let the client go, so that a worker
 * closed is gone from CLIENT LIST (BullMQ's getWorkers) when close() resolves; dropped at once
 * when forced or not connected, or after QUIT_WAIT_MS when a command still holds it.
 */
async function end(c: Redis, force: boolean): Promise<void> {
  if (!force && c.status === 'ready') {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>(ok => (timer = setTimeout(ok, QUIT_WAIT_MS)));
    await Promise.race([c.quit().catch(() => undefined), late]);
    clearTimeout(timer);
  }
  if (c.status !== 'end') {
    c.disconnect();
  }
}

/**
 * Resolves once `c` is ready to take commands, as BullMQ waits for its own connections: a client
 * made with `lazyConnect` is connected, one still connecting is waited for (the errors of its
 * failed tries are kept, not thrown), and one that ends first rejects with its last error. A
 * client with `enableOfflineQueue: false` refuses commands sent before it is ready, so the first
 * command must wait for this.
 */
async function connected(c: Redis): Promise<void> {
  if (c.status === 'ready') {
    return;
  }
  if (c.status === 'wait') {
    await c.connect();
    return;
  }
  if (c.status === 'end') {
    throw new Error('Connection is closed.');
  }
  let last: Error | undefined;
  const onError = (err: Error) => {
    last = err;
  };
  let onReady = (): void => undefined;
  let onEnd = (): void => undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onReady = () => resolve();
      onEnd = () => reject(last ?? new Error('Connection is closed.'));
      c.once('ready', onReady);
      c.once('end', onEnd);
      c.on('error', onError);
    });
  } finally {
    c.off('ready', onReady);
    c.off('end', onEnd);
    c.off('error', onError);
  }
}

function newClient(conn: TrafikeyConnection | undefined, blocking: boolean, connectionName?: string): Redis {
  const extra: RedisOptions = { maxRetriesPerRequest: blocking ? null : 20 };
  if (connectionName !== undefined) {
    extra.connectionName = connectionName;
  }
  if (conn && typeof (conn as Redis).duplicate === 'function') {
    return (conn as Redis).duplicate(extra);
  }
  // BullMQ's own reconnect pace (1 s, growing to 20 s) unless the application set one: errors
  // while the server is away arrive as often as on BullMQ's own connections.
  return new Redis({ retryStrategy: bullRetry, ...(conn as RedisOptions), ...extra });
}

function bullRetry(times: number): number {
  return Math.max(Math.min(Math.exp(times), 20000), 1000);
}

/** The application's ioredis client, when it passed one (it is duplicated, never used). */
function appClient(conn: TrafikeyConnection | undefined): Redis | undefined {
  return conn && typeof (conn as Redis).duplicate === 'function' ? (conn as Redis) : undefined;
}

/**
 * Stands in for BullMQ's listener on a client the application passed. BullMQ uses that client
 * and listens for its errors; this package duplicates it, and the copy's errors reach the
 * classes' `error` events. Without a listener the application's own client, still trying to
 * connect, would print each failed try to the console.
 */
const quiet = (): void => undefined;

/**
 * The command connections a process shares: one per connection setting (the same ioredis
 * client, or equal options), used by every backend whose own connection does not block. A
 * worker's waits (`CLAIM … BLOCK`) and QueueEvents' reads keep connections of their own; every
 * other command is bounded on the server, so one connection serves them all without holding
 * any back. The server then reads many commands at once instead of one per socket, and the
 * number of connections no longer grows with the number of queues and workers.
 */
const shared = new Map<unknown, { conn: Redis; users: number }>();

/** Options compared by value; functions in them (a retryStrategy) do not tell two apart. */
function settingOf(conn: TrafikeyConnection | undefined): unknown {
  return conn && typeof (conn as Redis).duplicate === 'function' ? conn : JSON.stringify(conn ?? {});
}

function acquire(conn: TrafikeyConnection | undefined): Redis {
  const setting = settingOf(conn);
  let entry = shared.get(setting);
  if (!entry || entry.conn.status === 'end') {
    entry = { conn: newClient(conn, false), users: 0 };
    // Each backend listens for the connection's events.
    entry.conn.setMaxListeners(0);
    shared.set(setting, entry);
  }
  entry.users += 1;
  return entry.conn;
}

/** One user fewer; true when it was the last, so the caller ends the connection. */
function release(conn: Redis): boolean {
  for (const [setting, entry] of shared) {
    if (entry.conn === conn) {
      entry.users -= 1;
      if (entry.users > 0) {
        return false;
      }
      shared.delete(setting);
      return true;
    }
  }
  return true;
}

/**
 * Adds, and workers' finish-and-fetch calls, made in one turn of the event loop leave
 * together: the first corks the socket; once the calls held carry more than `GATHER_MAX` jobs
 * (a call weighs the jobs it carries), the ones before the last go; the rest go once the
 * turn's other work is done. The server then reads the calls of many producers and workers
 * at once instead of one each, and it starts on the first ones while Node makes the others:
 * one write for the whole turn would have the two take turns instead. A full TRA.COMPLETESNEXT
 * therefore goes as soon as the next call is made. A call waits at most to the end of the turn.
 */
export function gather(conn: Redis, weight = 1): void {
  const socket = conn.stream;
  if (!socket || conn.status !== 'ready') return;
  if (socket.writableCorked === 0) {
    socket.cork();
    corkedCalls.set(socket, weight);
    process.nextTick(() => socket.uncork());
    return;
  }
  const n = (corkedCalls.get(socket) ?? 0) + weight;
  if (n > GATHER_MAX) {
    socket.uncork();
    socket.cork();
    corkedCalls.set(socket, weight);
  } else {
    corkedCalls.set(socket, n);
  }
}
/** A named worker prunes `b:pb` each time it has handed out this many jobs, by as many names. */
const PB_PRUNE = 1000;
/** Finish-and-fetch calls per TRA.COMPLETESNEXT at most: a write's worth of jobs. */
const FINISHES_MAX = 16;

/**
 * Finish-and-fetch calls waiting to be sent, by connection, then by queue and options: the
 * workers of a process share their command connection, so those of one queue that end jobs in
 * the same turn finish them together, as one worker of many jobs at once does.
 */
const finishing = new WeakMap<Redis, Map<string, Finishing[]>>();

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
  job?: any[];
}

/** Jobs per write (bench.mjs, add from 50 Queues: 8, 16, 32 and one write a turn tried). */
const GATHER_MAX = 16;
/** The calls held by a corked socket, this one included. */
const corkedCalls = new WeakMap<object, number>();

export interface TrafikeyBackendOptions {
  name: string;
  opts: QueueBaseOptions<any>;
  blocking?: boolean;
  withBlockingConnection?: boolean;
}

export class TrafikeyBackend extends EventEmitter implements IQueueBackend {
  readonly minimumBlockTimeout = 0.001;
  /** Upkeep wakes a BLOCKed claim as soon as a scheduled job falls due, so long waits are safe. */
  readonly maximumBlockTimeout = 10;
  closing: Promise<void> | undefined;

  readonly name: string;
  readonly prefix: string;
  /** The module's queue name Q (escaped) and the key base `emq:{Q}`. */
  readonly q: string;
  readonly base: string;
  /** The queue keys of TRA.COMPLETENEXT and TRA.COMPLETESNEXT, made once: every finish sends them. */
  private readonly finishKeys: string[];
  private readonly claimKeys: string[];
  /**
   * A claim's options, fixed by the probe: `ROW` where the module has it (the job comes with
   * its claim, no second read), and `BY` with a named worker's name where the module has that.
   */
  private claimOpts: string[] = [];
  private readonly opts: QueueBaseOptions<any> & Record<string, any>;
  private readonly conn: Redis;
  private readonly blockingConn: Redis | undefined;
  /** Its command connection blocks (QueueEvents' reads): its own, not shared. */
  private readonly blocking: boolean;
  private released = false;
  /** The events stream's newest entry when a blocking backend became ready: its first `$`. */
  private eventsFrom: string | undefined;
  private readonly owns: boolean;
  private ready: Promise<void> | undefined;
  /** The server passed `checkServer`: a call need not wait a turn of the event loop for `ready`. */
  private checked = false;
  private blockingId: number | undefined;
  private waiting: Promise<unknown> | undefined;
  private stash: Claimed[] = [];
  /** Jobs handed out under a worker's name, and where `prunePb` walks `b:pb` on from. */
  private named = 0;
  private pbCursor = '0';
  /**
   * Verbs of newer modules, probed with COMMAND INFO (the crate version is not bumped with
   * each verb): TRA.SETPROGRESS/TRA.ADDLOG take progress and logs from any client, and a
   * module with TRA.COMPLETENEXT writes `drained` after COMPLETE itself and takes ECHO.
   */
  private anyReporter = false;
  private moduleDrains = false;
  /**
   * Module 0.3.0's forms (probed by TRA.ADD): ALIAS for custom ids, FAIL's RETRY/DELAY/STACK,
   * REPROCESS's FROM/KEEPMADE/KEEPSTARTED/LIFO. Without them the adapter's own `b:*` hashes
   * stand in (module 0.2.0).
   */
  private native = false;
  private hasPriority = false;
  /** TRA.LIMIT/TRA.LIMITS: a queue's rate limit, global concurrency and manual limit (FOR). */
  private hasLimits = false;
  /** DEDUP on the producers, TRA.DEDUP and TRA.UNDEDUP. */
  private hasDedup = false;
  /** TRA.SCHEDULER/TRA.SCHEDULERS: job schedulers kept by the server. */
  private hasSched = false;
  /** TRA.COMPLETESNEXT: the finish-and-fetch calls of one turn go as one call. */
  private hasFinishes = false;
  /**
   * The claims' `BY` (module 0.3.1): a named worker's claims record its name in each row
   * they take. Without it the adapter keeps the names in `b:pb`.
   */
  private hasBy = false;
  /**
   * DEDUP's `KEEPLAST` (module 0.3.2): keepLastIfActive kept and made by the server,
   * atomically with the holder's finish. Without it the adapter keeps the jobs in `b:dn`.
   */
  private hasKeepLast = false;
  /** TRA.SETDATA (module 0.3.3): a job's data replaced, for updateData. */
  private hasSetData = false;
  /** A worker's `metrics` option as the finishes' `METRICS max`: none without it. */
  private metrics: Cmd = [];
  /** Aliases named by events this backend read (module id → custom id), the newest 10 000. */
  private readonly aliases = new Map<string, string>();

  private rememberAlias(id: string, alias: string): void {
    this.aliases.set(id, alias);
    if (this.aliases.size > 10000) {
      this.aliases.delete(this.aliases.keys().next().value as string);
    }
  }
  /** The server's `redis_version` (Valkey reports its Redis compatibility level), once ready. */
  redisVersion = '';
  readonly databaseType = 'valkey';

  constructor(
    o: TrafikeyBackendOptions,
    borrowed?: { conn: Redis; blockingConn?: Redis },
  ) {
    super();
    this.name = o.name;
    this.opts = o.opts as any;
    this.prefix = (o.opts as any).prefix ?? 'bull';
    this.q = escapeQueueName(`${this.prefix}:${this.name}`);
    this.base = `emq:{${this.q}}`;
    this.finishKeys = ['wait', 'prio', 'active', 'delayed', 'completed', 'meta', 'events'].map(r => this.key(r));
    this.claimKeys = ['wait', 'prio', 'active', 'delayed', 'meta', 'events'].map(r => this.key(r));
    this.blocking = !!o.blocking;
    if (borrowed) {
      this.conn = borrowed.conn;
      this.blockingConn = borrowed.blockingConn;
      this.owns = false;
    } else {
      const connection = o.opts.connection as TrafikeyConnection;
      this.conn = o.blocking ? newClient(connection, true) : acquire(connection);
      // A worker's blocking connection carries the name BullMQ's getWorkers() looks for: the
      // queue's clientName, plus `:w:<name>` for a named worker (ioredis re-applies it on reconnect).
      const wname = (o.opts as any).name as string | undefined;
      this.blockingConn = o.withBlockingConnection
        ? newClient(o.opts.connection as TrafikeyConnection, true, this.clientName(wname ? `:w:${wname}` : ''))
        : undefined;
      this.owns = true;
      this.conn.on('error', this.onError);
      this.conn.on('ready', this.onReady);
      this.conn.on('close', this.onClose);
      this.blockingConn?.on('error', err => this.emit('error', err));
      appClient(connection)?.on('error', quiet);
    }
  }

  private readonly onError = (err: Error): void => {
    this.emit('error', err);
  };
  private readonly onReady = (): void => {
    this.emit('ready');
  };
  private readonly onClose = (): void => {
    this.emit('close');
  };

  /** Stops listening to the command connection; true when this backend may end it. */
  private letGo(): boolean {
    if (this.released) {
      return false;
    }
    this.released = true;
    appClient(this.opts.connection as TrafikeyConnection | undefined)?.off('error', quiet);
    this.conn.off('error', this.onError);
    this.conn.off('ready', this.onReady);
    this.conn.off('close', this.onClose);
    return this.blocking ? true : release(this.conn);
  }

  // ---------------------------------------------------------------- identity and keys

  /** The ioredis client (BullMQ's Redis backend exposes its client the same way). */
  get client(): Promise<Redis> {
    return this.waitUntilReady().then(() => this.conn);
  }

  get qualifiedName(): string {
    return `${this.prefix}:${this.name}`;
  }

  get keys(): KeysMap {
    const k: KeysMap = { '': `${this.base}:` };
    for (const r of ROLES) {
      k[r] = this.key(r);
    }
    k.waiting = k.wait;
    k.paused = k.wait;
    k.prioritized = k.prio;
    for (const r of ['id', 'stalled', 'limiter', 'repeat', 'pc', 'marker', 'de', 'stalled-check']) {
      k[r] = this.key(`b:${r}`);
    }
    return k;
  }

  key(role: string): string {
    return `${this.base}:${role}`;
  }

  jobKey(id: string): string {
    return `${this.base}:job:${id}`;
  }

  toKey(type: string): string {
    if (type === 'waiting' || type === 'paused') {
      return this.key('wait');
    }
    if (type === 'prioritized') {
      return this.key('prio');
    }
    if (ROLES.includes(type)) {
      return this.key(type);
    }
    if (isBranded(type)) {
      return this.jobKey(type);
    }
    return this.key(`b:${type}`);
  }

  parseNodeKey(key: string): { prefix: string; queueName: string; id: string } {
    const last = key.lastIndexOf(':');
    const prev = key.lastIndexOf(':', last - 1);
    return {
      prefix: key.slice(0, Math.max(prev, 0)),
      queueName: key.slice(prev + 1, last),
      id: key.slice(last + 1),
    };
  }

  clientName(suffix = ''): string {
    return `${this.prefix}:${Buffer.from(this.name).toString('base64')}${suffix}`;
  }

  forQueue(queueName: string, prefix?: string): IQueueBackend {
    return new TrafikeyBackend(
      { name: queueName, opts: { ...this.opts, prefix: prefix ?? this.prefix } as QueueBaseOptions<any> },
      { conn: this.conn, blockingConn: this.blockingConn },
    );
  }

  // ---------------------------------------------------------------- lifecycle

  waitUntilReady(): Promise<void> {
    if (!this.ready) {
      this.ready = this.checkServer().then(
        () => {
          this.checked = true;
        },
        err => {
          this.ready = undefined;
          throw err;
        },
      );
    }
    return this.ready;
  }

  /** The module's client rule: wire equal, major equal, a module new enough, the fence set. */
  private async checkServer(): Promise<void> {
    await connected(this.conn);
    if (this.blockingConn) {
      await connected(this.blockingConn);
    }
    let reply: unknown;
    try {
      reply = await this.conn.call('EMQ.VERSION');
    } catch (err) {
      if (/unknown command/i.test((err as Error).message)) {
        throw new Error(
          'trafikey-bullmq: the trafikey module is not loaded on this server (EMQ.VERSION is an unknown command); start valkey-server with --loadmodule libtrafikey.so',
        );
      }
      throw err;
    }
    const v = pairs(reply);
    if (String(v.wire) !== WIRE) {
      throw new Error(`trafikey-bullmq: the server speaks wire ${v.wire}, this client ${WIRE}`);
    }
    if (Number(v.module_major) !== MODULE_MAJOR) {
      throw new Error(
        `trafikey-bullmq: module major ${v.module_major} is not the ${MODULE_MAJOR} this client is built for`,
      );
    }
    if (!versionAtLeast(String(v.module_version), MIN_MODULE_VERSION)) {
      throw new Error(
        `trafikey-bullmq: module ${v.module_version} is too old; CLAIM … BLOCK needs ${MIN_MODULE_VERSION.join('.')} or later`,
      );
    }
    const fence = await this.conn.get(FENCE);
    if (fence === null) {
      throw new Error(
        `trafikey-bullmq: ${FENCE} is absent in this database; run EMQ.INSTALL 1 ${FENCE} once`,
      );
    }
    if (fence !== WIRE) {
      throw new Error(`trafikey-bullmq: ${FENCE} holds ${fence}, not ${WIRE}`);
    }
    const probe = (await this.conn.call('COMMAND', 'INFO', 'TRA.SETPROGRESS', 'TRA.ADDLOG', 'TRA.COMPLETENEXT', 'TRA.ADD', 'TRA.PRIORITY', 'TRA.LIMIT', 'TRA.DEDUP', 'TRA.SCHEDULER', 'TRA.COMPLETESNEXT', 'TRA.SETDATA')) as unknown[];
    this.anyReporter = !!probe[0] && !!probe[1];
    this.moduleDrains = !!probe[2];
    this.native = !!probe[3];
    this.hasPriority = !!probe[4];
    this.hasLimits = !!probe[5];
    this.hasDedup = !!probe[6];
    this.hasSched = !!probe[7];
    this.hasFinishes = !!probe[8];
    this.hasSetData = !!probe[9];
    this.hasBy = this.native && versionAtLeast(String(v.module_version), BY_MODULE_VERSION);
    this.hasKeepLast = this.native && versionAtLeast(String(v.module_version), KEEPLAST_MODULE_VERSION);
    const name = (this.opts as any).name;
    this.claimOpts = !this.native ? [] : this.hasBy && name ? ['ROW', 'BY', String(name)] : ['ROW'];
    const limiter = (this.opts as any).limiter as { max?: number; duration?: number } | undefined;
    if (limiter && this.blockingConn) {
      // A worker's limiter becomes its queue's rate limit, obeyed by every claim of the queue
      // (BullMQ's limiter is per queue too: one counter all workers share); the last worker
      // started wins, and the limit stays when the worker stops.
      if (!this.hasLimits) {
        throw new NotSupportedError('a worker rate limiter (limiter option; this module has no TRA.LIMIT: upgrade)');
      }
      await this.conn.call('TRA.LIMIT', 1, this.key('meta'), 'RATE', ...this.rateArgs(limiter.max, limiter.duration));
    }
    const points = (this.opts as any).metrics?.maxDataPoints;
    if (points && this.blockingConn) {
      // A worker's metrics are counted by the server as each finish writes (METRICS on
      // COMPLETE, COMPLETENEXT and FAIL), by the minute of its clock.
      const docs = JSON.stringify(await this.conn.call('COMMAND', 'DOCS', 'EMQ.COMPLETE'));
      if (!docs.includes('"METRICS"')) {
        throw new NotSupportedError('metrics (this module has no METRICS on its finishes: upgrade)');
      }
      this.metrics = ['METRICS', Math.min(METRICS_MAX, Math.max(1, Math.floor(Number(points))))];
    }
    const maxStalled = (this.opts as any).maxStalledCount;
    if (this.native && this.blockingConn && typeof maxStalled === 'number') {
      // A worker's maxStalledCount becomes its queue's `max-stalls`, which upkeep honours: the
      // same rule (fail once a job stalled more often than that), judged by the server; with
      // workers of different settings the last one started wins.
      await this.conn.hset(this.key('meta'), 'max-stalls', Math.min(1000, Math.max(0, Math.floor(maxStalled))));
    }
    if (this.hasBy && this.blockingConn && (this.opts as any).name) {
      // The names a worker kept beside the rows before the module took BY are never read
      // again: the first named worker on such a module drops them.
      await this.conn.del(this.key('b:pb'));
    }
    if (this.blocking) {
      // QueueEvents reads from `$` by default: from its first read, which comes a round trip or
      // more after it is ready. The newest event now stands in for `$`, so that every event
      // after `waitUntilReady()` is seen.
      const last = (await this.conn.xrevrange(this.key('events'), '+', '-', 'COUNT', 1)) as [string, string[]][];
      this.eventsFrom = last[0]?.[0] ?? '0-0';
    }
    const info = String(await this.conn.info('server'));
    this.redisVersion = /redis_version:([^\r\n]+)/.exec(info)?.[1] ?? '';
    if (this.blockingConn) {
      this.blockingId = Number(await this.blockingConn.client('ID'));
    }
  }

  async close(force = false): Promise<void> {
    if (!this.owns) {
      return;
    }
    if (!this.closing) {
      this.closing = (async () => {
        await this.disconnectBlocking(true).catch(() => undefined);
        await this.returnStash().catch(() => undefined);
        if (this.blockingConn) {
          await end(this.blockingConn, force);
        }
        if (!this.letGo()) {
          return;
        }
        await end(this.conn, force);
      })();
    }
    return this.closing;
  }

  async disconnect(): Promise<void> {
    if (!this.owns) {
      return;
    }
    this.blockingConn?.disconnect();
    if (!this.closing && this.letGo()) {
      this.conn.disconnect();
    }
  }

  async setName(name: string): Promise<void> {
    const c = this.blockingConn ?? this.conn;
    try {
      await c.client('SETNAME', name);
    } catch (err) {
      if (!this.closing) {
        throw err;
      }
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

  /** Jobs claimed by a wait but never handed out go back to the front of ready. */
  private async returnStash(): Promise<void> {
    const stash = this.stash.splice(0);
    for (const c of stash) {
      await this.conn.call('EMQ.REQUEUE', 5, this.jobKey(c.id), this.key('active'), this.key('wait'), this.key('prio'), this.key('events'), c.token);
    }
  }

  // ---------------------------------------------------------------- ids

  private heldKey(id: string): string {
    return `${this.q}\n${id}`;
  }

  /**
   * The token to send for a job: the module's, when this process holds the job and the caller
   * names BullMQ's token for it (or none, or BullMQ's "0", which skip BullMQ's lock check);
   * else the caller's own, which the module refuses unless it is the claim's.
   */
  private tokenFor(id: string, token?: string): string {
    const h = held.get(this.heldKey(id));
    if (h && (token === undefined || token === '0' || token === h.bull)) {
      return h.module;
    }
    return token ?? '-';
  }

  /**
   * Forgets that this process holds a job, when the token the caller sent is still the one kept
   * for it. A finish's reply can come after another slot has claimed the same job again (an
   * immediate retry, a move back to wait) and kept its own token: that token is not ours to drop.
   */
  private letGoOf(id: string, sent: string): void {
    const key = this.heldKey(id);
    if (held.get(key)?.module === sent) {
      held.delete(key);
    }
  }

  /** The module's token for a job this process holds, whoever asks (progress, logs). */
  private heldToken(id: string): string | undefined {
    return held.get(this.heldKey(id))?.module;
  }

  /** The module id of a BullMQ id: branded ids are themselves, custom ids go through the alias hash. */
  async resolve(id: string): Promise<string | null> {
    if (isBranded(id)) {
      return id;
    }
    await this.waitUntilReady();
    return this.conn.hget(this.native ? this.key('alias') : this.key('b:alias'), id);
  }

  private async mustResolve(id: string, cmd: string): Promise<string> {
    if (this.checked && isBranded(id)) {
      return id;
    }
    await this.waitUntilReady();
    const r = await this.resolve(id);
    if (!r) {
      throw new Error(`Missing key for job ${id}. ${cmd}`);
    }
    return r;
  }

  /** The BullMQ ids of module ids: custom ids where an alias names them. */
  private async external(ids: string[]): Promise<string[]> {
    if (ids.length === 0) {
      return ids;
    }
    await this.waitUntilReady();
    if (this.native) {
      // The row's `k` is its ALIAS; a row already gone keeps its module id.
      const p = this.conn.pipeline();
      for (const id of ids) {
        p.hget(this.jobKey(id), 'k');
      }
      const res = await replies(p);
      return ids.map((id, i) => (res[i] as string | null) ?? id);
    }
    const rev = await this.conn.hmget(this.key('b:rev'), ...ids);
    return ids.map((id, i) => rev[i] ?? id);
  }

  // ---------------------------------------------------------------- adding

  /**
   * BACKOFF of a retried job. The server computes fixed and exponential backoff itself;
   * jitter and custom strategies have no server form (the client decides those retries).
   */
  private backoffWords(backoff: JobsOptions['backoff']): Cmd {
    const b = backoff as { type?: string; delay?: number; jitter?: number } | number | undefined;
    const bo = typeof b === 'number' ? { type: 'fixed', delay: b } : b;
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

  /** A job's name, data and option words, shared by ENQUEUE/SCHEDULE and TRA.ADD. */
  private addParts(job: JobJson, alias?: string): { name: string; data: string; extra: Cmd; delay: number } {
    const opts: JobsOptions = job.opts ?? {};
    for (const [opt, feature] of [
      ['parent', 'flows (the parent option)'],
      ['debounce', 'deduplication (debounce: use the deduplication option)'],
      ['repeat', 'job schedulers (the repeat option)'],
    ] as const) {
      if ((opts as any)[opt]) {
        throw new NotSupportedError(feature);
      }
    }
    const dedup = opts.deduplication as
      | { id?: string; ttl?: number; extend?: boolean; replace?: boolean; keepLastIfActive?: boolean }
      | undefined;
    if (dedup && !this.hasDedup) {
      throw new NotSupportedError('deduplication (this module has no DEDUP: upgrade)');
    }
    const name = job.name && Buffer.byteLength(job.name) <= 256 ? job.name : '_';
    // BullMQ's default options (a job given none) are left out, each waiting job some 19 bytes
    // smaller: BullMQ's Job gives a job read back without options the same defaults.
    const blob: Record<string, unknown> = isDefaultOpts(opts) ? { ts: job.timestamp } : { o: opts, ts: job.timestamp };
    if (name !== job.name) {
      blob.n = job.name;
    }
    const extra: Cmd = [];
    if (opts.priority) {
      extra.push('PRIORITY', opts.priority);
    }
    if (opts.attempts && opts.attempts > 1) {
      extra.push('ATTEMPTS', opts.attempts);
      extra.push(...this.backoffWords(opts.backoff));
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
      if (dedup.keepLastIfActive && this.hasKeepLast) {
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

  private addCmd(job: JobJson, id: string, alias?: string): Cmd {
    const { name, data, extra, delay } = this.addParts(job, alias);
    if (delay > 0) {
      return ['EMQ.SCHEDULE', 3, this.jobKey(id), this.key('delayed'), this.key('events'), `+${delay}`, name, data, ...extra];
    }
    return ['EMQ.ENQUEUE', 4, this.jobKey(id), this.key('wait'), this.key('prio'), this.key('events'), name, data, ...extra];
  }

  /** One TRA.ADD of at most {@link ADD_BATCH} jobs: the rows as keys, then `name data k words…` each. */
  private bulkCmd(jobs: { job: JobJson; id: string; alias?: string }[]): Cmd {
    const rows: Cmd = [];
    const body: Cmd = [];
    for (const j of jobs) {
      const { name, data, extra, delay } = this.addParts(j.job, j.alias);
      if (delay > 0) {
        extra.push('DELAY', `+${delay}`);
      }
      rows.push(this.jobKey(j.id));
      body.push(name, data, extra.length, ...extra);
    }
    return ['TRA.ADD', 4, this.key('wait'), this.key('prio'), this.key('delayed'), this.key('events'), jobs.length, ...rows, ...body];
  }

  /**
   * A custom jobId maps to a branded id through `<Q>:b:alias` (and back through `:b:rev`).
   * Returns the module id to create, or null when a job under that custom id still exists.
   */
  private async aliasFor(custom: string): Promise<string | null> {
    const aliasKey = this.key('b:alias');
    const existing = await this.conn.hget(aliasKey, custom);
    if (existing) {
      if (await this.conn.exists(this.jobKey(existing))) {
        return null;
      }
      await this.conn.multi().hdel(aliasKey, custom).hdel(this.key('b:rev'), existing).exec();
    }
    const id = mintJobId();
    const set = await this.conn.hsetnx(aliasKey, custom, id);
    if (!set) {
      return null;
    }
    await this.conn.hset(this.key('b:rev'), id, custom);
    return id;
  }

  async addJob(job: JobJson, jobId: string, parentKeyOpts?: ParentKeyOpts): Promise<string> {
    if (parentKeyOpts?.parentKey) {
      throw new NotSupportedError('flows (a parent job)');
    }
    const [id] = await this.addJobs([{ job, jobId }]);
    return id;
  }

  async addJobs(entries: { job: JobJson; jobId: string; parentKeyOpts?: ParentKeyOpts }[]): Promise<string[]> {
    await this.waitUntilReady();
    for (const e of entries) {
      if (e.parentKeyOpts?.parentKey) {
        throw new NotSupportedError('flows (a parent job)');
      }
    }
    if (this.native) {
      return this.addNative(entries);
    }
    const ids: (string | null)[] = [];
    for (const e of entries) {
      if (e.jobId && !isBranded(e.jobId)) {
        ids.push(await this.aliasFor(e.jobId));
      } else {
        ids.push(e.jobId || mintJobId());
      }
    }
    const cmds: Cmd[] = [];
    entries.forEach((e, i) => {
      const id = ids[i];
      if (id) {
        cmds.push(this.addCmd(e.job, id));
      }
    });
    // One transaction: a BLOCKed worker must not take the first job before the batch is whole.
    if (cmds.length === 1) {
      await this.conn.call(...(cmds[0] as [string, ...any[]]));
    } else if (cmds.length > 1) {
      const m = this.conn.multi();
      for (const c of cmds) {
        m.call(...(c as [string, ...any[]]));
      }
      const res = await m.exec();
      for (const [err] of res ?? []) {
        if (err) {
          throw err;
        }
      }
    }
    const dup = entries.filter((_, i) => !ids[i]);
    if (dup.length > 0) {
      const p = this.conn.pipeline();
      for (const e of dup) {
        p.xadd(this.key('events'), '*', 'event', 'duplicated', 'jobId', e.jobId);
      }
      await replies(p);
    }
    return entries.map((e, i) => (e.jobId && !isBranded(e.jobId) ? e.jobId : (ids[i] as string)));
  }

  /**
   * Module 0.3.0: a custom id is the job's ALIAS, claimed atomically with the row (reply 0: a
   * live job has it, nothing written). One job is ENQUEUE/SCHEDULE; more are TRA.ADD in
   * batches of 250 inside one MULTI, so BullMQ's addBulk stays one transaction (no worker sees
   * half a batch). TRA.ADD refuses a whole call on a bad argument; the options are built here,
   * so a refusal is a bug, and it is thrown.
   */
  private async addNative(entries: { job: JobJson; jobId: string }[]): Promise<string[]> {
    const jobs = entries.map(e => {
      const custom = !!e.jobId && !isBranded(e.jobId);
      return { job: e.job, id: custom || !e.jobId ? mintJobId() : e.jobId, alias: custom ? e.jobId : undefined, jobId: e.jobId };
    });
    // Each job's reply: 1 created, 0 its custom id is taken, or the id of the job holding its
    // deduplication id (nothing created).
    let created: unknown[];
    if (jobs.length === 1) {
      gather(this.conn);
      created = [await this.conn.call(...(this.addCmd(jobs[0].job, jobs[0].id, jobs[0].alias) as [string, ...any[]]))];
    } else {
      const m = this.conn.multi();
      for (let i = 0; i < jobs.length; i += ADD_BATCH) {
        m.call(...(this.bulkCmd(jobs.slice(i, i + ADD_BATCH)) as [string, ...any[]]));
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
                undo.call('TRA.REMOVE', 8, this.jobKey(jobs[b * ADD_BATCH + i].id), ...this.setKeys(), this.key('events'));
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
    for (let i = 0; i < jobs.length; i++) {
      const h = holders[i];
      if (h !== null) {
        await this.keepLastIfActive(jobs[i].job, jobs[i].alias, h);
      }
    }
    const known = await this.external(holders.filter((h): h is string => h !== null));
    let k = 0;
    return jobs.map((j, i) => (holders[i] !== null ? known[k++] : (j.alias ?? j.id)));
  }

  /**
   * A job's deduplication id when it asks for keepLastIfActive and the adapter keeps its
   * successor (a module without KEEPLAST).
   */
  private keepLastId(opts: JobsOptions | undefined): string | undefined {
    const d = opts?.deduplication as { id?: string; keepLastIfActive?: boolean } | undefined;
    return d?.keepLastIfActive && d.id && !this.hasKeepLast ? String(d.id) : undefined;
  }

  /**
   * keepLastIfActive, kept by the adapter on a module without KEEPLAST: a job deduplicated
   * while its id's holder is active is stored in `<Q>:b:dn` (one entry per deduplication id,
   * the latest wins) and added, holding the id, once the holder finishes (see requeueNext).
   * Not atomic with the module's calls: the holder's state is read again after the store,
   * and a holder that finished meanwhile brings the stored job in at once.
   */
  private async keepLastIfActive(job: JobJson, alias: string | undefined, holder: string): Promise<void> {
    const dedupId = this.keepLastId(job.opts);
    if (dedupId === undefined || (await this.stateOf(holder)) !== 'active') {
      return;
    }
    const proto = JSON.stringify({ name: job.name, data: job.data, opts: job.opts, jid: alias });
    await this.conn.hset(this.key('b:dn'), dedupId, proto);
    if ((await this.stateOf(holder)) !== 'active') {
      await this.requeueNext(dedupId);
    }
  }

  /**
   * keepLastIfActive's jobs whose holder finished without a finish of this adapter's (the
   * server failed it for its stalls, or it was removed): added now. The stall check runs
   * this once per interval. `b:dn` holds an entry only while its id's holder lives, so it is
   * about as large as the jobs active.
   */
  private async releaseKeptJobs(): Promise<void> {
    const ids = Object.keys(await this.conn.hgetall(this.key('b:dn')));
    if (ids.length === 0) {
      return;
    }
    const held = this.conn.pipeline();
    for (const id of ids) {
      held.get(this.dedupKey(id));
    }
    const holders = await replies(held);
    const rows = this.conn.pipeline();
    for (const h of holders) {
      rows.hget(this.jobKey(String(h)), 'st');
    }
    const states = await replies(rows);
    for (const [i, id] of ids.entries()) {
      // A holder back in wait after a stall still holds the id: its finish brings the job in.
      if (holders[i] === null || states[i] === null || states[i] === 'completed' || states[i] === 'failed') {
        await this.requeueNext(id);
      }
    }
  }

  /** A finished job of keepLastIfActive: the job stored for its deduplication id, added now. */
  private async requeueNext(dedupId: string | undefined): Promise<void> {
    if (dedupId === undefined) {
      return;
    }
    const [raw, gone] = await replies(this.conn.multi().hget(this.key('b:dn'), dedupId).hdel(this.key('b:dn'), dedupId));
    if (!raw || Number(gone) !== 1) {
      return;
    }
    const p = JSON.parse(raw as string) as { name: string; data: string; opts: JobsOptions; jid?: string };
    await this.addJobs([{ job: { name: p.name, data: p.data, opts: p.opts, timestamp: Date.now() } as JobJson, jobId: p.jid ?? '' }]);
  }

  async addFlow(): Promise<[Error | null, string | number][]> {
    throw new NotSupportedError('flows');
  }

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
    await this.needSched();
    if ((this.opts as any).settings?.repeatStrategy) {
      throw new NotSupportedError('a custom repeatStrategy (the server computes the iteration times)');
    }
    const rule: Cmd = [];
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
    const res = (await this.conn
      .pipeline()
      .call('TRA.SCHEDULER', 4, ...this.schedKeys(id), 'SET', ...rule, 'JOB', ...this.jobName(name), data, ...extra)
      .time()
      .exec()) ?? [];
    if (res[0]?.[0]) {
      const err = res[0][0];
      if (errCode(err) === 'EMQSTATE' && /already exists/.test(err.message)) {
        // A pattern's time whose iteration is still held: BullMQ's words for its refusal.
        throw new Error('Cannot create job scheduler iteration - job ID already exists. addJobScheduler');
      }
      throw new Error(`${err.message}. addJobScheduler`);
    }
    const [jobId, time] = res[0][1] as [string, number];
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
        await this.conn.call('EMQ.PROMOTE', 5, this.jobKey(String(jobId)), this.key('delayed'), this.key('wait'), this.key('prio'), this.key('events'));
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
  private async dropPreviousIteration(id: string, m: Record<string, any>, made: string): Promise<void> {
    const times = [Number(m.next), Number(m.next) - Number(m.every)];
    const ids = (await Promise.all(times.map(t => this.resolve(`repeat:${id}:${t}`)))).filter((j): j is string => !!j && j !== made);
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
          await this.conn.call('TRA.REMOVE', 8, this.jobKey(ids[i]), ...this.setKeys(), this.key('events'));
        } catch (err) {
          if (errCode(err) !== 'EMQSTATE') {
            throw err;
          }
        }
      }
    }
  }

  /** The scheduler as it is, when an upsert gives its `every` a new interval or phase. */
  private async restartedEvery(id: string, rule: Cmd): Promise<Record<string, any> | null> {
    const m = await this.schedulerRow(id);
    if (!m || !m.every || !m.next) {
      return null;
    }
    const every = Number(rule[1]);
    const offset = rule[2] === 'OFFSET' ? Number(rule[3]) : 0;
    return Number(m.every) === every && Number(m.offset ?? 0) === offset ? null : m;
  }

  private async needSched(): Promise<void> {
    await this.waitUntilReady();
    if (!this.hasSched) {
      throw new NotSupportedError('job schedulers (this module has no TRA.SCHEDULER: upgrade)');
    }
  }

  /** TRA.SCHEDULER's keys: the scheduler's hash, the queue's schedulers, delayed and events. */
  private schedKeys(id: string): string[] {
    return [this.key(`sched:${id}`), this.key('scheds'), this.key('delayed'), this.key('events')];
  }

  /** A job name within the module's 256 bytes (a longer one is kept in the options blob). */
  private jobName(name: string): [string] {
    return [Buffer.byteLength(name) <= 256 ? name : '_'];
  }

  /**
   * A scheduler's job template: data, and ENQUEUE's words from the template's options; the
   * blob keeps the options and the repeat rule, from which each iteration's BullMQ options
   * are made when it is read.
   */
  private templateParts(name: string, data: string, templateOpts: JobsOptions, opts: RepeatableOptions): { data: string; extra: Cmd } {
    for (const [opt, feature] of [
      ['parent', 'flows (the parent option)'],
      ['deduplication', 'deduplication in a job scheduler template'],
    ] as const) {
      if ((templateOpts as any)?.[opt]) {
        throw new NotSupportedError(feature);
      }
    }
    const o = { ...(templateOpts ?? {}) };
    const extra: Cmd = [];
    if (o.priority) {
      extra.push('PRIORITY', o.priority);
    }
    if (o.attempts && o.attempts > 1) {
      extra.push('ATTEMPTS', o.attempts);
      extra.push(...this.backoffWords(o.backoff));
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
    if (this.jobName(name)[0] !== name) {
      blob.n = name;
    }
    extra.push('OPTS', JSON.stringify(blob));
    return { data: data ?? '{}', extra };
  }

  // ---------------------------------------------------------------- fetching

  private get lease(): number {
    return Math.max(1, Math.floor((this.opts as any).lockDuration ?? 30000));
  }


  /** `[jobData, id, rateLimitDelay, delayUntil]`, as BullMQ's workers read it. */
  private async handOut(c: Claimed, bull: string, worker?: string): Promise<any[]> {
    held.set(this.heldKey(c.id), { module: c.token, bull });
    if (worker && !this.hasBy) {
      // A module without BY has no row field for the worker's name: the adapter keeps it beside. Not
      // awaited: the job's own copy names its worker already, and the calls this process makes
      // about the job later go on the same connection, after it; awaiting it cost a named
      // worker a round trip a job (40% of its jobs/s at concurrency 50). A refused write
      // leaves the name unrecorded, not the job unrun.
      gather(this.conn);
      this.conn.hset(this.key('b:pb'), c.id, worker).catch(() => undefined);
      if (++this.named % PB_PRUNE === 0) {
        void this.prunePb();
      }
    }
    const json = await this.getJobData(c.id, c.id, claimedRow(c.entry, worker));
    if (!json) {
      this.letGoOf(c.id, c.token);
      return [undefined, undefined, 0, 0];
    }
    return [json, json.id, 0, 0];
  }

  /**
   * Drops the worker names of jobs whose rows are gone. The server deletes finished jobs
   * itself (retention, KEEP), and the module does not know the adapter's hash, so a worker
   * that names itself prunes it: every `PB_PRUNE` jobs it hands out, it walks on through the
   * next `PB_PRUNE` names (HSCAN from where it stopped) and deletes those of missing rows. Job
   * ids are never reused, so a missing row never comes back. Best effort: a failed pass is
   * tried again at the next.
   */
  private async prunePb(): Promise<void> {
    const key = this.key('b:pb');
    try {
      let seen = 0;
      do {
        const [next, flat] = await this.conn.hscan(key, this.pbCursor, 'COUNT', PB_PRUNE);
        this.pbCursor = next;
        const ids = flat.filter((_, i) => i % 2 === 0);
        seen += ids.length;
        if (ids.length === 0) {
          continue;
        }
        const p = this.conn.pipeline();
        for (const id of ids) {
          p.exists(this.jobKey(id));
        }
        const exists = await replies(p);
        const gone = ids.filter((_, i) => Number(exists[i]) === 0);
        if (gone.length > 0) {
          await this.conn.hdel(key, ...gone);
        }
      } while (this.pbCursor !== '0' && seen < PB_PRUNE);
    } catch {
      // The next pass tries again.
    }
  }

  async moveToActive(token: string, name?: string): Promise<any[]> {
    await this.waitUntilReady();
    const stashed = this.stash.shift();
    if (stashed) {
      return this.handOut(stashed, token, name);
    }
    const reply = (await this.conn.call('EMQ.CLAIM', 6, ...this.claimKeys, token, this.lease, 'COUNT', 1, ...this.claimOpts)) as any[];
    if (!reply || reply.length === 0) {
      return [undefined, undefined, 0, 0];
    }
    return this.handOut({ id: String(reply[0][0]), token, entry: reply[0] }, token, name);
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
    const p = this.blockingConn.call('EMQ.CLAIM', 6, ...this.claimKeys, token, this.lease, 'COUNT', 1, 'BLOCK', ms, ...this.claimOpts);
    this.waiting = p;
    try {
      const reply = (await p) as any[];
      if (reply && reply.length > 0) {
        const id = String(reply[0][0]);
        if (this.closing) {
          await this.conn.call('EMQ.REQUEUE', 5, this.jobKey(id), this.key('active'), this.key('wait'), this.key('prio'), this.key('events'), token);
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

  async extendLock(jobId: string, token: string, duration: number): Promise<number> {
    const id = await this.resolve(jobId);
    if (!id) {
      return 0;
    }
    try {
      await this.conn.call('EMQ.EXTEND', 2, this.jobKey(id), this.key('active'), this.tokenFor(id, token), Math.max(1, Math.floor(duration)));
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
    const args: (string | number)[] = [];
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
        p.call('EMQ.EXTENDS', 1, this.key('active'), Math.max(1, Math.floor(duration)), ...args.slice(2 * i, 2 * (i + EXTEND_BATCH)));
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
  private finishError(err: unknown, jobId: string, state: string | null, cmd: string, token: string | undefined): Error {
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

  private async stateOf(id: string): Promise<string | null> {
    return this.conn.hget(this.jobKey(id), 'st');
  }

  /**
   * After a finish: the next job when asked for, and BullMQ's `drained` event when nothing is
   * ready or active any more (the module writes no such event).
   */
  private async next(token: string, fetchNext: boolean, completed = false): Promise<void | any[]> {
    const next = fetchNext ? await this.moveToActive(token, (this.opts as any).name) : undefined;
    if (!next?.[0] && !(completed && this.moduleDrains)) {
      const c = await this.counts();
      if (c.wait + c.prio + c.active === 0) {
        await this.conn.xadd(this.key('events'), 'MAXLEN', '~', 10000, '*', 'event', 'drained');
      }
    }
    return next;
  }

  async moveToCompleted<T = any, R = any, N extends string = string>(
    job: MinimalJob<T, R, N>,
    returnValue: R,
    removeOnComplete: boolean | number | KeepJobs,
    token: string,
    fetchNext: boolean,
  ): Promise<{ result: void | any[]; finishedOn: number }> {
    const jobId = job.id as string;
    const id = await this.mustResolve(jobId, 'moveToFinished');
    const keep = removeOnComplete ?? (this.opts as any).removeOnComplete;
    const rv = JSON.stringify(returnValue === undefined ? null : returnValue);
    const keepLast = this.keepLastId(job.opts);
    if (fetchNext && this.moduleDrains && this.stash.length === 0 && keepLast === undefined) {
      // Finish and fetch in one atomic call; the next job is claimed with the same token.
      let done: Finished;
      const sent = this.tokenFor(id, token);
      try {
        done = await this.finishNext(id, sent, rv, [...keepArgs(keep), 'ECHO', ...this.metrics, ...this.claimOpts]);
      } catch (err) {
        throw this.finishError(err, jobId, await this.stateOf(id), 'moveToFinished', token);
      }
      const finishedOn = Date.now();
      this.letGoOf(id, sent);
      if (done.job) {
        return { result: await this.handOut({ id: String(done.job[0]), token: done.token, entry: done.job }, token, (this.opts as any).name), finishedOn };
      }
      return { result: [undefined, undefined, 0, 0], finishedOn };
    }
    const sent = this.tokenFor(id, token);
    try {
      await this.conn.call('EMQ.COMPLETE', 4, this.jobKey(id), this.key('active'), this.key('completed'), this.key('events'), sent, rv, ...keepArgs(keep), ...(this.moduleDrains ? ['ECHO'] : []), ...this.metrics);
    } catch (err) {
      throw this.finishError(err, jobId, await this.stateOf(id), 'moveToFinished', token);
    }
    const finishedOn = Date.now();
    this.letGoOf(id, sent);
    await this.requeueNext(keepLast);
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
  private finishNext(id: string, token: string, rv: string, tail: Cmd): Promise<Finished> {
    return new Promise((resolve, reject) => {
      const entry: Finishing = { id, token, rv, resolve, reject };
      if (!this.hasFinishes) {
        this.sendFinishes([entry], tail);
        return;
      }
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

  private sendFinishes(batch: Finishing[], tail: Cmd): void {
    gather(this.conn, batch.length);
    const keys = this.finishKeys;
    const [first] = batch;
    if (batch.length === 1) {
      this.conn.call('TRA.COMPLETENEXT', 8, this.jobKey(first.id), ...keys, first.token, first.rv, this.lease, ...tail).then(
        reply => {
          const [done, jobs] = reply as [number, unknown];
          first.resolve({ done: Number(done), token: first.token, job: Array.isArray(jobs) ? jobs[0] : undefined });
        },
        first.reject,
      );
      return;
    }
    const pairs = batch.flatMap(e => [e.token, e.rv]);
    // The jobs fetched are claimed under a token of the backend's own: each is then held by
    // its caller's BullMQ token alone (`tokenFor`), not by another caller's.
    const claim = `tkf:${randomUUID()}`;
    this.conn.call('TRA.COMPLETESNEXT', 7, ...keys, batch.length, ...batch.map(e => this.jobKey(e.id)), ...pairs, claim, this.lease, ...tail).then(
      reply => {
        const [codes, jobs] = reply as [number[], unknown];
        const next = Array.isArray(jobs) ? [...jobs] : [];
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
        batch.forEach(e => this.sendFinishes([e], tail));
      },
    );
  }

  private failCmd(id: string, token: string, reason: string): Cmd {
    return ['EMQ.FAIL', 7, this.jobKey(id), this.key('active'), this.key('wait'), this.key('prio'), this.key('delayed'), this.key('failed'), this.key('events'), token, reason ?? ''];
  }

  private async fail(jobId: string, token: string | undefined, reason: string, extra: Cmd, stack: string | undefined, cmd: string): Promise<string> {
    const id = await this.mustResolve(jobId, cmd);
    const sent = this.tokenFor(id, token);
    if (this.native) {
      // Module 0.3.0 keeps the stack in the row (each FAIL replaces it).
      try {
        const reply = await this.conn.call(...(this.failCmd(id, sent, reason).concat(extra, stack !== undefined ? ['STACK', stack] : []) as [string, ...any[]]));
        this.letGoOf(id, sent);
        return String(reply);
      } catch (err) {
        throw this.finishError(err, jobId, await this.stateOf(id), cmd, token);
      }
    }
    const p = this.conn.multi();
    p.call(...(this.failCmd(id, sent, reason).concat(extra) as [string, ...any[]]));
    if (stack !== undefined) {
      // The module keeps no stack trace; the adapter keeps the last one beside the row.
      p.hset(this.key('b:stack'), id, stack);
    }
    const res = await p.exec();
    const [err, reply] = res![0];
    if (err) {
      throw this.finishError(err, jobId, await this.stateOf(id), cmd, token);
    }
    this.letGoOf(id, sent);
    return String(reply);
  }

  async moveToFailed<T = any, R = any, N extends string = string>(
    job: MinimalJob<T, R, N>,
    failedReason: string,
    removeOnFail: boolean | number | KeepJobs,
    token: string,
    fetchNext: boolean,
    fieldsToUpdate?: Record<string, any>,
  ): Promise<{ result: void | any[]; finishedOn: number }> {
    const keep = removeOnFail ?? (this.opts as any).removeOnFail;
    await this.fail(job.id as string, token, failedReason, [...keepArgs(keep), 'FINAL', ...this.metrics], fieldsToUpdate?.stacktrace, 'moveToFinished');
    const finishedOn = Date.now();
    await this.requeueNext(this.keepLastId(job.opts));
    // BullMQ's retries-exhausted: the last attempt failed (not an early UnrecoverableError).
    if (job.attemptsMade + 1 >= (job.opts?.attempts ?? 1)) {
      await this.conn.xadd(this.key('events'), 'MAXLEN', '~', 10000, '*', 'event', 'retries-exhausted', 'jobId', job.id as string, 'attemptsMade', job.attemptsMade + 1);
    }
    return { result: await this.next(token, fetchNext), finishedOn };
  }

  async moveToDelayed(jobId: string, _timestamp: number, delay: number, token?: string, opts?: MoveToDelayedOpts): Promise<void | any[]> {
    if (opts?.fieldsToUpdate) {
      await this.retryAfter(jobId, token, delay, opts.fieldsToUpdate);
    } else {
      const id = await this.mustResolve(jobId, 'moveToDelayed');
      const sent = this.tokenFor(id, token);
      try {
        await this.conn.call('EMQ.DELAY', 4, this.jobKey(id), this.key('active'), this.key('delayed'), this.key('events'), sent, `+${Math.max(0, Math.floor(delay))}`);
      } catch (err) {
        throw this.finishError(err, jobId, await this.stateOf(id), 'moveToDelayed', token);
      }
      this.letGoOf(id, sent);
    }
    // BullMQ answers a move to delayed with the next job, or [] when none is fetched.
    if (opts?.fetchNext && token) {
      const next = (await this.next(token, true)) as any[];
      return next[0] ? next : [];
    }
    return [];
  }

  /**
   * A retry after `delay` ms, as BullMQ's client decided it. When the server's own backoff (the
   * BACKOFF the job was created with) gives that delay, FAIL without FINAL lets the server do
   * it. Otherwise (jitter, a custom strategy) the job is parked with DELAY, which counts no
   * attempt: the adapter counts it in `<Q>:b:am` and keeps the error in `<Q>:b:err`.
   */
  private async retryAfter(jobId: string, token: string | undefined, delay: number, fields: Record<string, any>): Promise<void> {
    if (this.native) {
      // Module 0.3.0: FAIL DELAY is the client's decision (custom backoff, jitter), counted
      // as an attempt by the server, whatever the job's own BACKOFF says.
      await this.fail(jobId, token, fields.failedReason ?? '', ['DELAY', `+${Math.max(0, Math.floor(delay))}`], fields.stacktrace, 'moveToDelayed');
      return;
    }
    const id = await this.mustResolve(jobId, 'moveToDelayed');
    const [b, am] = await this.conn.hmget(this.jobKey(id), 'b', 'am');
    const made = Number(am ?? 0) + 1;
    const m = /^([fe])(\d+)$/.exec(b ?? '');
    const server = !m ? 0 : m[1] === 'f' ? Number(m[2]) : Number(m[2]) * 2 ** (made - 1);
    if (server === Math.floor(delay)) {
      await this.fail(jobId, token, fields.failedReason ?? '', [], fields.stacktrace, 'moveToDelayed');
      return;
    }
    const sent = this.tokenFor(id, token);
    try {
      await this.conn.call('EMQ.DELAY', 4, this.jobKey(id), this.key('active'), this.key('delayed'), this.key('events'), sent, `+${Math.max(0, Math.floor(delay))}`);
    } catch (err) {
      throw this.finishError(err, jobId, await this.stateOf(id), 'moveToDelayed', token);
    }
    this.letGoOf(id, sent);
    const p = this.conn.multi().hincrby(this.key('b:am'), id, 1).hset(this.key('b:err'), id, fields.failedReason ?? '');
    if (fields.stacktrace !== undefined) {
      p.hset(this.key('b:stack'), id, fields.stacktrace);
    }
    await replies(p);
  }

  async moveToWaitingChildren(_jobId: string, _token: string, _opts?: MoveToWaitingChildrenOpts): Promise<boolean> {
    throw new NotSupportedError('flows (waiting for children)');
  }

  async moveJobFromActiveToWait(jobId: string, token?: string): Promise<number> {
    const id = await this.mustResolve(jobId, 'moveJobFromActiveToWait');
    const sent = this.tokenFor(id, token);
    try {
      await this.conn.call('EMQ.REQUEUE', 5, this.jobKey(id), this.key('active'), this.key('wait'), this.key('prio'), this.key('events'), sent);
    } catch (err) {
      throw this.finishError(err, jobId, await this.stateOf(id), 'moveJobFromActiveToWait', token);
    }
    this.letGoOf(id, sent);
    // BullMQ answers with the time its limiter still holds the queue: the worker waits that long.
    return this.hasLimits ? Math.max(0, (await this.limits()).ttl ?? 0, await this.manualTtl()) : 0;
  }

  /** BullMQ's immediate retry; on module 0.3.0 FAIL RETRY [LIFO], ready now whatever the backoff. */
  async retryJob(jobId: string, lifo: boolean, token?: string, opts?: RetryJobOpts): Promise<void> {
    const decision: Cmd = this.native ? ['RETRY', ...(lifo ? ['LIFO'] : [])] : [];
    await this.fail(jobId, token, opts?.fieldsToUpdate?.failedReason ?? '', decision, opts?.fieldsToUpdate?.stacktrace, 'retryJob');
  }

  private reprocessCmd(id: string): Cmd {
    return ['EMQ.REPROCESS', 6, this.jobKey(id), this.key('completed'), this.key('failed'), this.key('wait'), this.key('prio'), this.key('events')];
  }

  async retryFinishedJob<T = any, R = any, N extends string = string>(
    job: MinimalJob<T, R, N>,
    state: 'failed' | 'completed',
    opts?: RetryOptions,
  ): Promise<void> {
    const jobId = job.id as string;
    const id = await this.mustResolve(jobId, 'reprocessJob');
    if (this.native) {
      // BullMQ keeps the attempt counters unless told to reset them; LIFO from the job's options.
      const args: Cmd = ['FROM', state];
      if (!opts?.resetAttemptsMade) {
        args.push('KEEPMADE');
      }
      if (!opts?.resetAttemptsStarted) {
        args.push('KEEPSTARTED');
      }
      if (job.opts?.lifo) {
        args.push('LIFO');
      }
      // BullMQ's retry keeps the last progress report.
      args.push('KEEPPROGRESS');
      try {
        await this.conn.call(...(this.reprocessCmd(id).concat(args) as [string, ...any[]]));
      } catch (err) {
        if (errCode(err) === 'EMQNOJOB') {
          throw new Error(`Missing key for job ${jobId}. reprocessJob`);
        }
        if (errCode(err) === 'EMQSTATE') {
          throw new Error(`Job ${jobId} is not in the ${state} state. reprocessJob`);
        }
        throw err;
      }
      return;
    }
    const [st, am, as] = await this.conn.hmget(this.jobKey(id), 'st', 'am', 'as');
    if (st === null) {
      throw new Error(`Missing key for job ${jobId}. reprocessJob`);
    }
    if (st !== state) {
      throw new Error(`Job ${jobId} is not in the ${state} state. reprocessJob`);
    }
    // REPROCESS clears the row's attempt counters; BullMQ keeps them unless told to reset,
    // so the adapter carries them over beside the row.
    const m = this.conn.multi();
    m.call(...(this.reprocessCmd(id) as [string, ...any[]]));
    if (opts?.resetAttemptsMade) {
      m.hdel(this.key('b:am'), id);
    } else if (Number(am ?? 0) > 0) {
      m.hincrby(this.key('b:am'), id, Number(am));
    }
    if (opts?.resetAttemptsStarted) {
      m.hdel(this.key('b:as'), id);
    } else if (Number(as ?? 0) > 0) {
      m.hincrby(this.key('b:as'), id, Number(as));
    }
    const res = await m.exec();
    if (res?.[0]?.[0]) {
      throw res[0][0];
    }
  }

  async promote(jobId: string): Promise<void> {
    const id = await this.mustResolve(jobId, 'promote');
    try {
      await this.conn.call('EMQ.PROMOTE', 5, this.jobKey(id), this.key('delayed'), this.key('wait'), this.key('prio'), this.key('events'));
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
   * The module's upkeep reclaims expired leases itself, so a worker sweeps nothing. Its check
   * only reports the stalls upkeep made since the last check (the `stalled` events), so that
   * the worker's own `stalled` event fires: one worker per interval, as BullMQ's lock does.
   */
  async moveStalledJobsToWait(): Promise<string[]> {
    const interval = Math.max(1, Math.floor((this.opts as any).stalledInterval ?? 30000));
    const lock = await this.conn.set(this.key('b:stalled-check'), '1', 'PX', interval, 'NX');
    if (lock !== 'OK') {
      return [];
    }
    // A failure here must not cost the stall report: the next check tries again.
    await this.releaseKeptJobs().catch(() => undefined);
    const seenKey = this.key('b:stalled-seen');
    const seen = await this.conn.get(seenKey);
    // The first check looks back one lease: stalls older than that were somebody else's to see.
    let from = seen ? `(${seen}` : `${Math.max(0, Date.now() - this.lease - interval)}-0`;
    // Read in pages: one XRANGE of the whole stream would hold the server for milliseconds.
    const ids: string[] = [];
    let last: string | undefined;
    for (let page = 0; page < STALL_PAGES; page++) {
      const entries = (await this.conn.xrange(this.key('events'), from, '+', 'COUNT', STALL_PAGE)) as [string, string[]][];
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

  // ---------------------------------------------------------------- administration

  async retryFinishedJobs(state: 'completed' | 'failed' = 'failed', count = 1000, timestamp = Date.now()): Promise<number> {
    const ids = await this.conn.zrangebyscore(this.key(state), '-inf', timestamp, 'LIMIT', 0, count);
    if (ids.length === 0) {
      return 0;
    }
    // BullMQ's retryJobs keeps the attempt counters and the progress, as job.retry() does.
    const keep: Cmd = this.native ? ['FROM', state, 'KEEPMADE', 'KEEPSTARTED', 'KEEPPROGRESS'] : [];
    const p = this.conn.pipeline();
    for (const id of ids) {
      p.call(...(this.reprocessCmd(id).concat(keep) as [string, ...any[]]));
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
      p.call('EMQ.PROMOTE', 5, this.jobKey(id), this.key('delayed'), this.key('wait'), this.key('prio'), this.key('events'));
    }
    await replies(p, moved);
    return ids.length < count ? 0 : 1;
  }

  async pause(pause: boolean): Promise<void> {
    await this.waitUntilReady();
    await this.conn.call('EMQ.CLAIM', 6, ...this.claimKeys, pause ? 'PAUSE' : 'RESUME');
  }

  async drain(delayed: boolean): Promise<void> {
    const args = [this.key('wait'), this.key('prio'), this.key('delayed'), this.key('events'), ...(delayed ? ['DELAYED'] : []), 'COUNT', 10000];
    while (Number(await this.conn.call('TRA.DRAIN', 4, ...args)) > 0) {
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
        const ids = (await this.conn.call('TRA.CLEAN', 2, this.key(state), this.key('events'), 'GRACE', grace, 'COUNT', count)) as string[];
        out.push(...ids);
        if (ids.length < count) {
          break;
        }
      }
    } else {
      const role = state === 'wait' || state === 'waiting' || state === 'paused' ? 'wait' : state === 'prioritized' ? 'prio' : state;
      if (role === 'wait' || role === 'prio' || role === 'delayed') {
        const ids = role === 'wait' ? await this.conn.lrange(this.key('wait'), 0, -1) : await this.conn.zrange(this.key(role), 0, -1);
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
            rm.call('TRA.REMOVE', 8, this.jobKey(id), ...this.setKeys(), this.key('events'));
          }
        });
        if (victims.length > 0) {
          // A job claimed or deleted since it was read is passed over, not reported.
          const done = await replies(rm, moved);
          const removed = victims.filter((_, i) => Number(done[i]) === 1);
          if (removed.length > 0) {
            await this.conn.xadd(this.key('events'), 'MAXLEN', '~', 10000, '*', 'event', 'cleaned', 'count', removed.length);
          }
          out.push(...removed);
        }
      }
    }
    await this.forget(out);
    return out.map(id => custom.get(id) ?? id);
  }

  /** Adds to `into` the custom id of each of `ids` that has one (none on a queue without). */
  private async customIds(ids: string[], into: Map<string, string>): Promise<void> {
    if (ids.length === 0 || Number(await this.conn.exists(this.native ? this.key('alias') : this.key('b:alias'))) === 0) {
      return;
    }
    const found = await this.external(ids);
    ids.forEach((id, i) => {
      if (found[i] !== id) {
        into.set(id, found[i]);
      }
    });
  }

  private setKeys(): string[] {
    return ['wait', 'prio', 'active', 'delayed', 'completed', 'failed'].map(r => this.key(r));
  }

  /** Drops the adapter's entries of deleted jobs (their alias, kept progress and stack). */
  private async forget(ids: string[]): Promise<void> {
    if (ids.length === 0) {
      return;
    }
    await this.waitUntilReady();
    if (this.native) {
      // The module deletes a row's alias with the row; only the worker's name is the adapter's.
      await this.conn.hdel(this.key('b:pb'), ...ids);
      return;
    }
    const rev = await this.conn.hmget(this.key('b:rev'), ...ids);
    const p = this.conn.pipeline();
    p.hdel(this.key('b:rev'), ...ids);
    p.hdel(this.key('b:progress'), ...ids);
    p.hdel(this.key('b:stack'), ...ids);
    for (const k of ['pb', 'am', 'as', 'err']) {
      p.hdel(this.key(`b:${k}`), ...ids);
    }
    const customs = rev.filter((r): r is string => !!r);
    if (customs.length > 0) {
      p.hdel(this.key('b:alias'), ...customs);
    }
    await replies(p);
  }

  async obliterate(opts: { force: boolean; count: number }): Promise<number> {
    await this.waitUntilReady();
    let left: number;
    try {
      left = Number(
        await this.conn.call('TRA.OBLITERATE', 8, ...this.setKeys(), this.key('meta'), this.key('events'), ...(opts.force ? ['FORCE'] : []), 'COUNT', Math.min(10000, Math.max(1, opts.count || 1000))),
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

  // ---------------------------------------------------------------- job mutations

  /** BullMQ's updateData: TRA.SETDATA replaces the row's data, whatever the job's state. */
  async updateData<T = any, R = any, N extends string = string>(job: MinimalJob<T, R, N>, data: T): Promise<void> {
    const id = await this.resolve(job.id as string);
    if (!id) {
      throw new Error(`Missing key for job ${job.id}. updateData`);
    }
    if (!this.hasSetData) {
      if (!(await this.conn.exists(this.jobKey(id)))) {
        throw new Error(`Missing key for job ${job.id}. updateData`);
      }
      throw new NotSupportedError('updateData (this module has no TRA.SETDATA: upgrade)');
    }
    try {
      await this.conn.call('TRA.SETDATA', 1, this.jobKey(id), JSON.stringify(data === undefined ? null : data));
    } catch (err) {
      if (errCode(err) === 'EMQNOJOB') {
        throw new Error(`Missing key for job ${job.id}. updateData`);
      }
      throw err;
    }
  }

  async updateProgress(jobId: string, progress: JobProgress): Promise<void> {
    const id = await this.mustResolve(jobId, 'updateProgress');
    const value = JSON.stringify(progress);
    const token = this.heldToken(id);
    if (token) {
      try {
        await this.conn.call('TRA.PROGRESS', 3, this.jobKey(id), this.key('active'), this.key('events'), token, value, ...(this.anyReporter ? ['ECHO'] : []));
        return;
      } catch (err) {
        if (errCode(err) !== 'EMQLEASE') {
          throw err;
        }
      }
    }
    if (this.anyReporter) {
      try {
        await this.conn.call('TRA.SETPROGRESS', 2, this.jobKey(id), this.key('events'), value, 'ECHO');
        return;
      } catch (err) {
        if (errCode(err) === 'EMQNOJOB') {
          throw new Error(`Missing key for job ${jobId}. updateProgress`);
        }
        throw err;
      }
    }
    // An older module takes progress from the holder only; for anyone else the adapter keeps it.
    if (!(await this.conn.exists(this.jobKey(id)))) {
      throw new Error(`Missing key for job ${jobId}. updateProgress`);
    }
    await this.conn
      .multi()
      .hset(this.key('b:progress'), id, value)
      .xadd(this.key('events'), 'MAXLEN', '~', 10000, '*', 'event', 'progress', 'jobId', jobId, 'data', value)
      .exec();
  }

  async addLog(jobId: string, logRow: string, keepLogs?: number): Promise<number> {
    const id = await this.mustResolve(jobId, 'addLog');
    const token = this.heldToken(id);
    if (token) {
      try {
        return Number(await this.conn.call('TRA.LOG', 2, this.jobKey(id), this.key(`log:${id}`), token, logRow, ...(keepLogs ? ['KEEP', keepLogs] : [])));
      } catch (err) {
        if (errCode(err) !== 'EMQLEASE') {
          throw err;
        }
      }
    }
    if (this.anyReporter) {
      try {
        return Number(await this.conn.call('TRA.ADDLOG', 2, this.jobKey(id), this.key(`log:${id}`), logRow, ...(keepLogs ? ['KEEP', keepLogs] : [])));
      } catch (err) {
        if (errCode(err) === 'EMQNOJOB') {
          throw new Error(`Missing key for job ${jobId}. addLog`);
        }
        throw err;
      }
    }
    // An older module takes logs from the holder only: the log list is a plain key the module
    // deletes with its row.
    if (!(await this.conn.exists(this.jobKey(id)))) {
      throw new Error(`Missing key for job ${jobId}. addLog`);
    }
    const m = this.conn.multi().rpush(this.key(`log:${id}`), logRow);
    if (keepLogs) {
      m.ltrim(this.key(`log:${id}`), -keepLogs, -1);
    }
    m.llen(this.key(`log:${id}`));
    const res = await m.exec();
    return Number(res![res!.length - 1][1]);
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
      await this.conn.call('EMQ.RESCHEDULE', 3, this.jobKey(id), this.key('delayed'), this.key('events'), `+${Math.max(0, Math.floor(delay))}`);
    } catch (err) {
      if (errCode(err) === 'EMQSTATE') {
        throw new Error(`Job ${jobId} is not in the delayed state. changeDelay`);
      }
      throw err;
    }
  }

  /** TRA.PRIORITY (module 0.3.0) moves a ready job between wait and prio as the value needs. */
  async changePriority(jobId: string, priority = 0, lifo = false): Promise<void> {
    await this.waitUntilReady();
    const id = await this.resolve(jobId);
    if (!id || !(await this.conn.exists(this.jobKey(id)))) {
      throw new Error(`Missing key for job ${jobId}. changePriority`);
    }
    if (!this.hasPriority) {
      throw new NotSupportedError('changePriority (this module has no TRA.PRIORITY: upgrade to 0.3.0)');
    }
    try {
      await this.conn.call('TRA.PRIORITY', 4, this.jobKey(id), this.key('wait'), this.key('prio'), this.key('events'), Math.max(0, Math.floor(priority)), ...(lifo ? ['LIFO'] : []));
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
    if (this.hasSched) {
      // BullMQ keeps a scheduler's iteration that has not run yet from a direct removal (the
      // module allows it: that iteration is skipped); remove the scheduler instead.
      const [sched, st] = await this.conn.hmget(this.jobKey(id), 'rs', 'st');
      if (sched && (st === 'wait' || st === 'prio' || st === 'delayed') && (await this.conn.exists(this.key(`sched:${sched}`)))) {
        throw new Error(`Job ${jobId} belongs to a job scheduler and cannot be removed directly. remove`);
      }
    }
    try {
      await this.conn.call('TRA.REMOVE', 8, this.jobKey(id), ...this.setKeys(), this.key('events'));
      await this.forget([id]);
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
    await this.needDedup();
    const id = await this.resolve(jobId);
    if (!id || !isBranded(id)) {
      return 0;
    }
    return Number(await this.conn.call('TRA.UNDEDUP', 1, this.dedupKey(deduplicationId), 'IF', id));
  }

  /** TRA.UNDEDUP: releases the id whatever job holds it. */
  async deleteDeduplicationKey(deduplicationId: string): Promise<number> {
    await this.needDedup();
    return Number(await this.conn.call('TRA.UNDEDUP', 1, this.dedupKey(deduplicationId)));
  }

  // ---------------------------------------------------------------- job schedulers

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
    await this.needSched();
    return Number(await this.conn.call('TRA.SCHEDULER', 4, ...this.schedKeys(id), 'DEL')) === 1 ? 0 : 1;
  }

  /** One scheduler as TRA.SCHEDULERS GET answers it (null when there is none). */
  private async schedulerRow(id: string): Promise<Record<string, any> | null> {
    await this.waitUntilReady();
    if (!this.hasSched) {
      return null;
    }
    const reply = await this.conn.call('TRA.SCHEDULERS', 1, this.key('scheds'), 'GET', id);
    return reply ? pairs(reply) : null;
  }

  /** A scheduler in the fields of BullMQ's scheduler hash, as its JobScheduler reads them. */
  private schedulerHash(m: Record<string, any>): Record<string, string> {
    const blob = optsBlob(m.opts);
    const out: Record<string, string> = { name: blob.n ?? String(m.name), ic: String(m.count ?? 1), offset: String(m.offset ?? 0) };
    const copy: [string, string][] = [['limit', 'limit'], ['start', 'startDate'], ['end', 'endDate'], ['tz', 'tz'], ['pattern', 'pattern'], ['every', 'every']];
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

  async getJobScheduler(id: string): Promise<[any, string | null]> {
    const m = await this.schedulerRow(id);
    if (!m) {
      return [null, null];
    }
    return [Object.entries(this.schedulerHash(m)).flat(), m.next === null || m.next === undefined ? null : String(m.next)];
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
    if (!this.hasSched) {
      return [];
    }
    const list = (await this.conn.call('TRA.SCHEDULERS', 1, this.key('scheds'), 'LIST', start, end, ...(asc ? [] : ['DESC']))) as unknown[];
    return (list ?? []).flatMap(r => {
      const m = pairs(r);
      return [String(m.id), String(m.next)];
    });
  }

  async getJobSchedulersCount(): Promise<number> {
    await this.waitUntilReady();
    if (!this.hasSched) {
      return 0;
    }
    return Number(await this.conn.call('TRA.SCHEDULERS', 1, this.key('scheds'), 'COUNT'));
  }

  // ---------------------------------------------------------------- queries

  private static STATES: Record<string, JobState> = {
    wait: 'waiting',
    prio: 'prioritized',
    active: 'active',
    delayed: 'delayed',
    completed: 'completed',
    failed: 'failed',
  };

  async getState(jobId: string): Promise<JobState | 'unknown'> {
    const id = await this.resolve(jobId);
    const st = id ? await this.stateOf(id) : null;
    return (st && TrafikeyBackend.STATES[st]) || 'unknown';
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
   * A module before 0.3.0 keeps progress, stack, custom id, worker, counters and error beside
   * the row: the row and those, in the order getJobData reads them.
   */
  private async legacyRead(id: string): Promise<[Error | null, unknown][]> {
    const p = this.conn.pipeline();
    p.call('TRA.JOB', 1, this.jobKey(id));
    p.hget(this.key('b:progress'), id);
    p.hget(this.key('b:stack'), id);
    p.hget(this.key('b:rev'), id);
    p.hget(this.key('b:pb'), id);
    p.hmget(this.key('b:am'), id);
    p.hmget(this.key('b:as'), id);
    p.hget(this.key('b:err'), id);
    return ((await p.exec()) ?? []) as [Error | null, unknown][];
  }

  /** The row as BullMQ's JobJson; `external` is the id BullMQ knows the job by. */
  async getJobData(jobId: string, known?: string, claimed?: ClaimedRow): Promise<JobJson | undefined> {
    // The probe decides where the alias and the stack are read from.
    if (!this.checked) {
      await this.waitUntilReady();
    }
    const id = known ?? (await this.resolve(jobId));
    if (!id) {
      return undefined;
    }
    let res: [Error | null, unknown][];
    if (this.native) {
      // Module 0.3.0's row holds the stack and the alias, and FAIL/REPROCESS keep the counters;
      // a claim with ROW brought the row, and the worker's name when it has one.
      // With BY the row names the worker itself (`worker`).
      let row: unknown;
      let by: unknown = null;
      if (claimed) {
        row = claimed.row;
        by = this.hasBy ? null : (claimed.by ?? null);
      } else if (this.hasBy) {
        row = await this.conn.call('TRA.JOB', 1, this.jobKey(id));
      } else {
        [row, by] = await replies(this.conn.pipeline().call('TRA.JOB', 1, this.jobKey(id)).hget(this.key('b:pb'), id));
      }
      res = [[null, row], [null, null], [null, row0Stack(row)], [null, row0Alias(row)], [null, by], [null, null], [null, null], [null, null]];
    } else {
      res = await this.legacyRead(id);
    }
    if (res[0][0]) {
      throw res[0][0];
    }
    if (!res[0][1]) {
      return undefined;
    }
    const row = view(res[0][1]);
    const blob = optsBlob(row.opts);
    const opts = blob.o ?? {};
    const progressRaw = (row.progress as string | null) ?? (res[1][1] as string | null);
    let progress: JobProgress = 0;
    if (progressRaw !== null && progressRaw !== undefined) {
      try {
        progress = JSON.parse(progressRaw);
      } catch {
        progress = progressRaw;
      }
    }
    const state = String(row.state);
    const made = (num(row.made) ?? 0) + (num((res[5][1] as any[])?.[0]) ?? 0);
    const started = (num(row.started) ?? 0) + (num((res[6][1] as any[])?.[0]) ?? 0);
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
      id: (res[3][1] as string | null) ?? id,
      name: blob.n ?? String(row.name),
      data: row.data ?? '{}',
      opts,
      progress,
      attemptsMade: made,
      attemptsStarted: started,
      stalledCounter: num(row.stalls) ?? 0,
      timestamp: jobTime(blob, row.created) ?? 0,
      delay,
      priority: num(row.priority) ?? 0,
      failedReason: row.error ?? (res[7][1] as string | null) ?? undefined,
      stacktrace: (res[2][1] as string | null) ?? undefined,
      returnvalue: row.result ?? undefined,
    } as JobJson;
    const processedOn = num(row.claimed);
    if (processedOn) {
      json.processedOn = processedOn;
    }
    const finishedOn = num(row.finished);
    if (finishedOn) {
      json.finishedOn = finishedOn;
    }
    const by = res[4][1] ?? row.worker;
    if (by) {
      json.processedBy = String(by);
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
      json.opts = { ...opts, jobId: `repeat:${row.scheduler}:${at}`, repeatJobKey: String(row.scheduler), timestamp: createdAt, delay: iterationDelay, repeat } as JobsOptions;
      json.repeatJobKey = String(row.scheduler);
      if (state === 'delayed' && made === 0) {
        json.delay = iterationDelay;
      }
    }
    return json;
  }

  /** The key of a deduplication id (`DEDUP id`): a string naming the job that holds it. */
  private dedupKey(id: string): string {
    return this.key(`dedup:${id}`);
  }

  private async needDedup(): Promise<void> {
    await this.waitUntilReady();
    if (!this.hasDedup) {
      throw new NotSupportedError('deduplication (this module has no TRA.DEDUP: upgrade)');
    }
  }

  /** TRA.DEDUP: the job holding a deduplication id, by the id BullMQ knows it by. */
  async getDeduplicationJobId(deduplicationId: string): Promise<string | null> {
    await this.needDedup();
    const holder = (await this.conn.call('TRA.DEDUP', 1, this.dedupKey(deduplicationId))) as string | null;
    return holder === null ? null : (await this.external([String(holder)]))[0];
  }

  async getJobLogs(jobId: string, start = 0, end = -1, asc = true): Promise<{ logs: string[]; count: number }> {
    const id = await this.resolve(jobId);
    if (!id) {
      return { logs: [], count: 0 };
    }
    const k = this.key(`log:${id}`);
    const res = await this.conn
      .multi()
      .lrange(k, asc ? start : -(end + 1), asc ? end : -(start + 1))
      .llen(k)
      .exec();
    let logs = (res![0][1] as string[]) ?? [];
    if (!asc) {
      logs = logs.reverse();
    }
    return { logs, count: Number(res![1][1]) };
  }

  /**
   * BullMQ's rule on TRA.LIMITS: a manual limit's time while one runs; else, with `maxJobs`
   * or a rate limit set, the window's time once it holds that many jobs (0 before); with
   * neither, the window's time (-2 when none is open, as PTTL of a missing key).
   */
  async getRateLimitTtl(maxJobs?: number): Promise<number> {
    const l = await this.limits();
    if ((l.hold ?? -2) > 0) {
      return l.hold as number;
    }
    const max = maxJobs || l['rate-max'];
    if (max) {
      return (l.count ?? 0) >= max && (l.window ?? -2) > 0 ? (l.window as number) : 0;
    }
    return Math.max(l.window ?? -2, await this.manualTtl());
  }

  private async counts(): Promise<Record<string, number>> {
    const reply = await this.conn.call('TRA.COUNTS', 7, ...this.setKeys(), this.key('meta'));
    const m = pairs(reply);
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
        if (role === 'active') {
          // Active is a set by deadline, BullMQ's a list, newest first, that its Queue reverses
          // when asked for ascending order: ascending ranks, reversed here, come out in order.
          if (asc) {
            p.zrange(this.key(role), start, end);
          } else {
            p.zrevrange(this.key(role), start, end);
          }
        } else if (asc) {
          p.zrange(this.key(role), start, end);
        } else {
          p.zrevrange(this.key(role), start, end);
        }
        send();
      }
    }
    const res = sent > 0 ? await replies(p) : [];
    const out: any[] = [];
    for (let i = 0; i < types.length; i++) {
      const at = slots[i];
      let ids = at === null || at === undefined ? [] : ((res[at] as string[] | undefined) ?? []);
      if ((types[i] as string) === 'active' && asc) {
        ids = ids.slice().reverse();
      }
      out.push(await this.external(ids));
    }
    return out;
  }

  async getDependencyCounts(_jobId: string, types: string[]): Promise<number[]> {
    return types.map(() => 0);
  }

  async getDependencies(_jobId: string, _opts: DependenciesOpts): Promise<any> {
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

  async paginate(): Promise<any> {
    throw new NotSupportedError('flows (paginated dependencies)');
  }

  // ---------------------------------------------------------------- meta and events

  // BullMQ's global concurrency (`concurrency`) and global rate limit (`max`, `duration`) are
  // the module's limits of the queue, set with TRA.LIMIT and kept in `meta` in the module's
  // own form: the reads below take them from TRA.LIMITS.

  private async needLimits(): Promise<void> {
    await this.waitUntilReady();
    if (!this.hasLimits) {
      throw new NotSupportedError('rate limits and global concurrency (this module has no TRA.LIMIT: upgrade)');
    }
  }

  private async limit(...args: (string | number)[]): Promise<number> {
    await this.needLimits();
    return Number(await this.conn.call('TRA.LIMIT', 1, this.key('meta'), ...args));
  }

  /** BullMQ's max and duration as RATE's arguments, within the module's ranges. */
  private rateArgs(max: unknown, duration: unknown): [number, number] {
    const clamp = (v: unknown, hi: number) => Math.min(hi, Math.max(1, Math.floor(Number(v) || 1)));
    return [clamp(max, 2 ** 31 - 1), clamp(duration, 2 ** 31)];
  }

  /** TRA.LIMITS: the queue's limits and where they stand now. */
  private async limits(): Promise<Record<string, number | null>> {
    await this.waitUntilReady();
    if (!this.hasLimits) {
      return { 'rate-max': null, 'rate-ms': null, concurrency: null, count: 0, window: -2, hold: -2, ttl: 0, active: 0 };
    }
    const m = pairs(await this.conn.call('TRA.LIMITS', 2, this.key('meta'), this.key('active')));
    const out: Record<string, number | null> = {};
    for (const [k, v] of Object.entries(m)) {
      out[k] = v === null || v === undefined ? null : Number(v);
    }
    return out;
  }

  /** BullMQ's meta fields that are the module's limits, by TRA.LIMITS's names. */
  private static LIMIT_FIELDS: Record<string, string> = { concurrency: 'concurrency', max: 'rate-max', duration: 'rate-ms' };
  /**
   * The module's own fields of `meta` but `paused` (its limits in its own form, and the
   * `max-stalls` a worker sets), not shown as BullMQ's meta.
   */
  private static MODULE_FIELDS = ['rate', 'concurrency', 'hold-until', 'max-stalls'];

  async setQueueMeta(values: Record<string, string | number>): Promise<number> {
    // `paused` is the module's own field of meta; a client never writes it directly.
    const { paused: _p, concurrency, max, duration, ...rest } = values;
    let n = 0;
    if (concurrency !== undefined) {
      n += await this.limit('CONCURRENCY', Math.min(2 ** 31 - 1, Math.max(1, Math.floor(Number(concurrency) || 1))));
    }
    if (max !== undefined || duration !== undefined) {
      const l = await this.limits();
      n += await this.limit('RATE', ...this.rateArgs(max ?? l['rate-max'] ?? 1, duration ?? l['rate-ms'] ?? 1));
    }
    if (Object.keys(rest).length > 0) {
      n += await this.conn.hset(this.key('meta'), rest);
    }
    return n;
  }

  async getQueueMetaField(field: string): Promise<string | null> {
    return (await this.getQueueMetaFields([field]))[0];
  }

  async getQueueMetaFields(fields: string[]): Promise<(string | null)[]> {
    if (fields.length === 0) {
      return [];
    }
    await this.waitUntilReady();
    const own = fields.filter(f => !(f in TrafikeyBackend.LIMIT_FIELDS));
    const [vals, l] = await Promise.all([
      own.length ? this.conn.hmget(this.key('meta'), ...own) : Promise.resolve([] as (string | null)[]),
      fields.some(f => f in TrafikeyBackend.LIMIT_FIELDS) ? this.limits() : Promise.resolve({} as Record<string, number | null>),
    ]);
    let i = 0;
    return fields.map(f => {
      if (f in TrafikeyBackend.LIMIT_FIELDS) {
        const v = l[TrafikeyBackend.LIMIT_FIELDS[f]];
        return v === null || v === undefined ? null : String(v);
      }
      return vals[i++] ?? null;
    });
  }

  async getQueueMeta(): Promise<Record<string, string>> {
    const [raw, l] = await Promise.all([this.conn.hgetall(this.key('meta')), this.limits()]);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(raw)) {
      if (!TrafikeyBackend.MODULE_FIELDS.includes(k)) {
        out[k] = v;
      }
    }
    for (const [f, m] of Object.entries(TrafikeyBackend.LIMIT_FIELDS)) {
      if (l[m] !== null && l[m] !== undefined) {
        out[f] = String(l[m]);
      }
    }
    return out;
  }

  async removeQueueMetaFields(fields: string[]): Promise<number> {
    const f = fields.filter(x => x !== 'paused' && !(x in TrafikeyBackend.LIMIT_FIELDS));
    let n = 0;
    if (fields.includes('concurrency')) {
      n += await this.limit('CONCURRENCY', 'OFF');
    }
    if (fields.includes('max') || fields.includes('duration')) {
      n += await this.limit('RATE', 'OFF');
    }
    return n + (f.length ? await this.conn.hdel(this.key('meta'), ...f) : 0);
  }

  async hasQueueMetaField(field: string): Promise<boolean> {
    return (await this.conn.hexists(this.key('meta'), field)) === 1;
  }

  /**
   * BullMQ's manual rate limit (`queue.rateLimit`, `worker.rateLimit`): no claim of the queue
   * for ms. It replaces the window in force, as BullMQ's overwrites its limiter key: CLEAR,
   * then FOR, in one transaction.
   */
  async setRateLimit(expireTimeMs: number): Promise<void> {
    await this.needLimits();
    const ms = Math.min(2 ** 31, Math.max(1, Math.floor(expireTimeMs)));
    if ((await this.limits())['rate-max'] === null) {
      // BullMQ's manual limit acts only where a rate limit is set (a worker's limiter or the
      // queue's global one): without one, claims go on and the limit is only a time to read
      // back (getRateLimitTtl, and the wait of the worker that met it).
      await this.conn.set(this.key('b:limiter'), '9007199254740991', 'PX', ms);
      return;
    }
    const res = await this.conn
      .multi()
      .call('TRA.LIMIT', 1, this.key('meta'), 'CLEAR')
      .call('TRA.LIMIT', 1, this.key('meta'), 'FOR', ms)
      .exec();
    const refused = res?.find(([err]) => err)?.[0];
    if (refused) {
      throw refused;
    }
  }

  /** Ends the rate window and a manual limit now (BullMQ deletes its limiter key). */
  async removeRateLimitKey(): Promise<number> {
    const kept = await this.conn.del(this.key('b:limiter'));
    return Math.max(kept, await this.limit('CLEAR'));
  }

  /** The time left of a manual limit set while no rate limit was (see setRateLimit), or -2. */
  private async manualTtl(): Promise<number> {
    return this.conn.pttl(this.key('b:limiter'));
  }

  async removeDeprecatedPriorityKey(): Promise<number> {
    return 0;
  }

  async trimEvents(maxLength: number): Promise<number> {
    return this.conn.xtrim(this.key('events'), 'MAXLEN', '~', maxLength);
  }

  async publishEvent(fields: Record<string, string | number>, maxEvents: number): Promise<string> {
    const flat: (string | number)[] = [];
    for (const [k, v] of Object.entries(fields)) {
      flat.push(k, v);
    }
    return (await this.conn.xadd(this.key('events'), 'MAXLEN', '~', maxEvents, '*', ...flat)) as string;
  }

  /**
   * Reads `<Q>:events` and speaks BullMQ's event vocabulary: `id` becomes `jobId` (a custom id
   * where an alias names it), facts take BullMQ's names, and the payloads events do not carry
   * (a result, a progress report) are read from the row.
   */
  async readEvents(id: string, blockTimeout: number): Promise<any> {
    await this.waitUntilReady();
    // Until a read returns entries, QueueEvents asks for `$` again: it still means the newest
    // event at ready.
    const from = id === '$' && this.eventsFrom !== undefined ? this.eventsFrom : id;
    const raw = (await this.conn.xread('BLOCK', Math.max(0, Math.floor(blockTimeout)), 'STREAMS', this.key('events'), from)) as
      | [string, [string, string[]][]][]
      | null;
    if (!raw || raw.length === 0) {
      return raw;
    }
    this.eventsFrom = undefined;
    const [stream, entries] = raw[0];
    const needs: { kind: 'r' | 'g'; id: string }[] = [];
    const ids = new Set<string>();
    const parsed = entries.map(([eid, f]) => {
      const o: Record<string, string> = {};
      for (let i = 0; i + 1 < f.length; i += 2) {
        o[f[i]] = f[i + 1];
      }
      if (o.id !== undefined) {
        ids.add(o.id);
        if (o.event === 'completed' && o.result === undefined) {
          needs.push({ kind: 'r', id: o.id });
        } else if (o.event === 'progress' && o.progress === undefined) {
          needs.push({ kind: 'g', id: o.id });
        }
      }
      return [eid, o] as const;
    });
    const p = this.conn.pipeline();
    for (const n of needs) {
      p.hget(this.jobKey(n.id), n.kind);
    }
    // Module 0.3.0: `added`/`delayed` carry the alias, and a live row has it in `k`; what an
    // event names is remembered, for rows already gone by the time `completed` is read. A
    // refused producer's `deduplicated` names the holder and the refused job's alias: no pair.
    if (this.native) {
      for (const [, o] of parsed) {
        if (o.id !== undefined && o.alias !== undefined && o.refused === undefined && o.kept === undefined) {
          this.rememberAlias(o.id, o.alias);
        }
      }
    }
    const idList = this.native ? [...ids].filter(x => !this.aliases.has(x)) : [...ids];
    if (idList.length > 0) {
      if (this.native) {
        for (const x of idList) {
          p.hget(this.jobKey(x), 'k');
        }
      } else {
        p.hmget(this.key('b:rev'), ...idList);
      }
    }
    const res = needs.length + idList.length > 0 ? await replies(p) : [];
    const payload = new Map<string, string | null>();
    needs.forEach((n, i) => payload.set(`${n.kind}:${n.id}`, (res[i] as string | null) ?? null));
    const rev = new Map<string, string>();
    if (this.native) {
      idList.forEach((x, i) => rev.set(x, (res[needs.length + i] as string | null) ?? x));
      for (const x of ids) {
        const a = this.aliases.get(x);
        if (a !== undefined) {
          rev.set(x, a);
        }
      }
    } else if (idList.length > 0) {
      const names = (res[needs.length] as (string | null)[] | undefined) ?? [];
      idList.forEach((x, i) => rev.set(x, names[i] ?? x));
    }
    const out: [string, string[]][] = [];
    for (const [eid, o] of parsed) {
      if (o.id === undefined) {
        out.push([eid, Object.entries(o).flat()]);
        continue;
      }
      const jobId = rev.get(o.id) ?? o.id;
      const f: string[] = ['event', o.event, 'jobId', jobId];
      switch (o.event) {
        case 'added':
          f.push('name', o.name ?? '');
          out.push([eid, f]);
          out.push([eid, ['event', 'waiting', 'jobId', jobId]]);
          continue;
        case 'delayed':
          // A new job's (it carries its name): BullMQ tells its adding first.
          if (o.name !== undefined) {
            out.push([eid, ['event', 'added', 'jobId', jobId, 'name', o.name]]);
          }
          f.push('delay', o.due ?? '0');
          break;
        case 'waiting':
        case 'removed':
          // BullMQ names the states a job leaves as its own keys are named: `wait`, `prioritized`.
          if (o.prev) {
            f.push('prev', o.prev === 'prio' ? 'prioritized' : o.prev);
          }
          break;
        case 'active':
          f.push('prev', 'waiting');
          break;
        case 'completed':
          f.push('returnvalue', jsonOr(o.result ?? payload.get(`r:${o.id}`), 'null'), 'prev', 'active');
          break;
        case 'failed':
          f.push('failedReason', o.error ?? '', 'prev', 'active');
          break;
        case 'progress':
          f.push('data', jsonOr(o.progress ?? payload.get(`g:${o.id}`), '0'));
          break;
        case 'deduplicated':
          // BullMQ's: the job holding the id, the id, and the job that was not added (or, with
          // REPLACE, the delayed job replaced). A job never added (or kept, KEEPLAST, until the
          // holder finishes) is known by its custom id, which the event carries as `alias`.
          f.push('deduplicationId', o.dedup ?? '');
          if (o.refused !== undefined || o.kept !== undefined) {
            f.push('deduplicatedJobId', o.alias ?? o.refused ?? o.kept ?? '');
          } else {
            f.push('deduplicatedJobId', rev.get(o.replaced ?? '') ?? o.replaced ?? '');
          }
          break;
        default:
          for (const [k, v] of Object.entries(o)) {
            if (k !== 'event' && k !== 'id') {
              f.push(k, v);
            }
          }
      }
      out.push([eid, f]);
    }
    return [[stream, out]];
  }
}
