// The backend's base, as BullMQ's QueueBase is its classes': the queue's identity and keys, its
// connections and their lifecycle, the server check at connect, and the ids and tokens of
// jobs.
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import type { QueueBaseOptions, WorkerOptions } from 'bullmq';
import { type Arg, type Call, Commands, type Name, type Names, rateArgs } from './commands.js';
import {
  acquire,
  appClient,
  connected,
  end,
  newClient,
  quiet,
  release,
  type TrafikeyConnection,
} from './connection.js';
import { escapeQueueName, isBranded } from './keys.js';
import { pairs, replies } from './reply.js';

export const WIRE = 'echomq:6.0.0';
export const MODULE_MAJOR = 0;
/**
 * The module version this package ships with, and the oldest it runs on: the two are
 * released together (Cargo.toml's version), so the package uses every verb of it.
 */
export const MODULE_VERSION = '0.3.3';
const FENCE = '{emq}:version';
/** The longest metrics series the module keeps (one week of minutes). */
const METRICS_MAX = 10080;

/** Thrown by every member that needs a module feature trafikey does not have yet. */
export class NotSupportedError extends Error {
  constructor(feature: string) {
    super(`trafikey-bullmq: ${feature} is not supported by the trafikey module yet`);
    this.name = 'NotSupportedError';
  }
}

/** What the backend reads of the options BullMQ's classes pass it: a queue's, or a worker's. */
export type BackendOptions = QueueBaseOptions<TrafikeyConnection> &
  Partial<Omit<WorkerOptions<TrafikeyConnection>, keyof QueueBaseOptions>>;

export interface TrafikeyBackendOptions {
  name: string;
  opts: QueueBaseOptions<TrafikeyConnection>;
  blocking?: boolean;
  withBlockingConnection?: boolean;
}

/** A job a claim took: its module id and token, and the claim's entry with `ROW`. */
export interface Claimed {
  id: string;
  token: string;
  /** `[id name data attempt row]`: the job as claimed, no read needed. */
  entry?: unknown[];
}

type KeysMap = Record<string, string>;

/**
 * Jobs held in this process, by `<Q>\n<module id>`: the token the module knows (the claim's,
 * which for a job taken while waiting or fetched by a finish is not the one BullMQ gave the
 * job) and the token BullMQ gave it, which a caller must name to act as the holder.
 */
const held = new Map<string, { module: string; bull: string }>();

const ROLES = ['wait', 'prio', 'active', 'delayed', 'completed', 'failed', 'meta', 'events'];

function parseVersion(v: string): number[] {
  return v
    .split(/[.-]/)
    .slice(0, 3)
    .map(x => parseInt(x, 10) || 0);
}

function versionAtLeast(v: string, min: string): boolean {
  const p = parseVersion(v);
  const m = parseVersion(min);
  for (let i = 0; i < 3; i++) {
    if ((p[i] ?? 0) !== (m[i] ?? 0)) {
      return (p[i] ?? 0) > (m[i] ?? 0);
    }
  }
  return true;
}

/**
 * The module's client rule on `EMQ.VERSION`'s reply: the wire equal, the major equal, the
 * module at least the version this package ships with. Throws the one error that says why not.
 */
export function checkVersion(reply: unknown): void {
  const v = pairs(reply);
  const version = String(v.module_version);
  if (String(v.wire) !== WIRE) {
    throw new Error(`trafikey-bullmq: the server speaks wire ${String(v.wire)}, this client ${WIRE}`);
  }
  if (Number(v.module_major) !== MODULE_MAJOR) {
    throw new Error(
      `trafikey-bullmq: module major ${String(v.module_major)} is not the ${MODULE_MAJOR} this client is built for`,
    );
  }
  if (!versionAtLeast(version, MODULE_VERSION)) {
    throw new Error(`trafikey-bullmq: trafikey module ${MODULE_VERSION} or later required, server has ${version}`);
  }
}

export abstract class QueueBase extends EventEmitter {
  readonly minimumBlockTimeout = 0.001;
  /** Upkeep wakes a BLOCKed claim as soon as a scheduled job falls due, so long waits are safe. */
  readonly maximumBlockTimeout = 10;
  closing: Promise<void> | undefined;

  readonly name: string;
  readonly prefix: string;
  /** The module's queue name Q (escaped) and the key base `emq:{Q}`. */
  readonly q: string;
  readonly base: string;
  /** The builder of this queue's module calls. */
  protected readonly cmd: Commands;
  /**
   * A claim's options: `ROW` (the job comes with its claim, no second read), and `BY` with a
   * named worker's name (the server records it in each row the claim takes).
   */
  protected readonly claimOpts: string[];
  protected readonly opts: BackendOptions;
  protected readonly conn: Redis;
  protected readonly blockingConn: Redis | undefined;
  /** Its command connection blocks (QueueEvents' reads): its own, not shared. */
  private readonly blocking: boolean;
  private released = false;
  /** The events stream's newest entry when a blocking backend became ready: its first `$`. */
  protected eventsFrom: string | undefined;
  private readonly owns: boolean;
  private ready: Promise<void> | undefined;
  /** The server passed `checkServer`: a call need not wait a turn of the event loop for `ready`. */
  protected checked = false;
  protected blockingId: number | undefined;
  /** A worker's `metrics` option as the finishes' `METRICS max`: none without it. */
  protected metrics: Arg[] = [];
  /** The server's `redis_version` (Valkey reports its Redis compatibility level), once ready. */
  redisVersion = '';
  readonly databaseType = 'valkey';

  constructor(o: TrafikeyBackendOptions, borrowed?: { conn: Redis; blockingConn?: Redis }) {
    super();
    this.name = o.name;
    this.opts = o.opts as BackendOptions;
    this.prefix = this.opts.prefix ?? 'bull';
    this.q = escapeQueueName(`${this.prefix}:${this.name}`);
    this.base = `emq:{${this.q}}`;
    this.cmd = new Commands(this.base);
    const worker = this.opts.name;
    this.claimOpts = worker ? ['ROW', 'BY', String(worker)] : ['ROW'];
    this.blocking = !!o.blocking;
    if (borrowed) {
      this.conn = borrowed.conn;
      this.blockingConn = borrowed.blockingConn;
      this.owns = false;
    } else {
      const connection = o.opts.connection;
      this.conn = o.blocking ? newClient(connection, true) : acquire(connection);
      // A worker's blocking connection carries the name BullMQ's getWorkers() looks for: the
      // queue's clientName, plus `:w:<name>` for a named worker (ioredis re-applies it on reconnect).
      this.blockingConn = o.withBlockingConnection
        ? newClient(connection, true, this.clientName(worker ? `:w:${worker}` : ''))
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
    appClient(this.opts.connection)?.off('error', quiet);
    this.conn.off('error', this.onError);
    this.conn.off('ready', this.onReady);
    this.conn.off('close', this.onClose);
    return this.blocking ? true : release(this.conn);
  }

  /** `name`'s call with its keys in the module's order (see commands.ts). */
  protected build<N extends Name>(name: N, names: Names<N>, ...args: Arg[]): Call {
    return this.cmd.build(name, names, ...args);
  }

  /** Sends `name`'s call on the command connection. */
  protected send<N extends Name>(name: N, names: Names<N>, ...args: Arg[]): Promise<unknown> {
    return this.conn.call(...this.cmd.build(name, names, ...args));
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

  /** How long a claim holds its job, from the worker's `lockDuration`. */
  protected get lease(): number {
    return Math.max(1, Math.floor(this.opts.lockDuration ?? 30000));
  }

  // ---------------------------------------------------------------- lifecycle

  waitUntilReady(): Promise<void> {
    if (!this.ready) {
      this.ready = this.checkServer().then(
        () => {
          this.checked = true;
        },
        (err: unknown) => {
          this.ready = undefined;
          throw err;
        },
      );
    }
    return this.ready;
  }

  /**
   * The module's client rule (see checkVersion) and the fence set; then what a worker brings
   * to its queue (its limiter, its `maxStalledCount`) and the facts later calls need.
   */
  private async checkServer(): Promise<void> {
    await connected(this.conn);
    if (this.blockingConn) {
      await connected(this.blockingConn);
    }
    let reply: unknown;
    try {
      reply = await this.send('EMQ.VERSION', {});
    } catch (err) {
      if (/unknown command/i.test((err as Error).message)) {
        throw new Error(
          'trafikey-bullmq: the trafikey module is not loaded on this server (EMQ.VERSION is an unknown command); start valkey-server with --loadmodule libtrafikey.so',
        );
      }
      throw err;
    }
    checkVersion(reply);
    const fence = await this.conn.get(FENCE);
    if (fence === null) {
      throw new Error(`trafikey-bullmq: ${FENCE} is absent in this database; run EMQ.INSTALL 1 ${FENCE} once`);
    }
    if (fence !== WIRE) {
      throw new Error(`trafikey-bullmq: ${FENCE} holds ${fence}, not ${WIRE}`);
    }
    const limiter = this.opts.limiter;
    if (limiter && this.blockingConn) {
      // A worker's limiter becomes its queue's rate limit, obeyed by every claim of the queue
      // (BullMQ's limiter is per queue too: one counter all workers share); the last worker
      // started wins, and the limit stays when the worker stops.
      await this.send('TRA.LIMIT', {}, 'RATE', ...rateArgs(limiter.max, limiter.duration));
    }
    const points = this.opts.metrics?.maxDataPoints;
    if (points && this.blockingConn) {
      // A worker's metrics are counted by the server as each finish writes (METRICS on
      // COMPLETE, COMPLETENEXT and FAIL), by the minute of its clock.
      this.metrics = ['METRICS', Math.min(METRICS_MAX, Math.max(1, Math.floor(Number(points))))];
    }
    const maxStalled = this.opts.maxStalledCount;
    if (this.blockingConn && typeof maxStalled === 'number') {
      // A worker's maxStalledCount becomes its queue's `max-stalls`, which upkeep honours: the
      // same rule (fail once a job stalled more often than that), judged by the server; with
      // workers of different settings the last one started wins.
      await this.conn.hset(this.key('meta'), 'max-stalls', Math.min(1000, Math.max(0, Math.floor(maxStalled))));
    }
    if (this.blockingConn && this.opts.name) {
      // Worker names an adapter kept beside the rows, before the module took BY, are never
      // read: the first named worker drops them.
      await this.conn.del(this.key('b:pb'));
    }
    if (this.blocking) {
      // QueueEvents reads from `$` by default: from its first read, which comes a round trip or
      // more after it is ready. The newest event now stands in for `$`, so that every event
      // after `waitUntilReady()` is seen.
      const last = (await this.conn.xrevrange(this.key('events'), '+', '-', 'COUNT', 1)) as [string, string[]][];
      this.eventsFrom = last[0]?.[0] ?? '0-0';
    }
    const info = await this.conn.info('server');
    this.redisVersion = /redis_version:([^\r\n]+)/.exec(info)?.[1] ?? '';
    if (this.blockingConn) {
      this.blockingId = Number(await this.blockingConn.client('ID'));
    }
  }

  /** Ends a `CLAIM … BLOCK` in flight with the empty reply; the blocking connection stays. */
  abstract disconnectBlocking(wait?: boolean): Promise<void>;

  /** Jobs claimed by a wait but never handed out go back to the front of ready. */
  protected abstract returnStash(): Promise<void>;

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

  // ---------------------------------------------------------------- ids and tokens

  private heldKey(id: string): string {
    return `${this.q}\n${id}`;
  }

  /** Keeps the tokens of a job this process now holds (see `held`). */
  protected hold(id: string, module: string, bull: string): void {
    held.set(this.heldKey(id), { module, bull });
  }

  /**
   * The token to send for a job: the module's, when this process holds the job and the caller
   * names BullMQ's token for it (or none, or BullMQ's "0", which skip BullMQ's lock check);
   * else the caller's own, which the module refuses unless it is the claim's.
   */
  protected tokenFor(id: string, token?: string): string {
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
  protected letGoOf(id: string, sent: string): void {
    const key = this.heldKey(id);
    if (held.get(key)?.module === sent) {
      held.delete(key);
    }
  }

  /** The module's token for a job this process holds, whoever asks (progress, logs). */
  protected heldToken(id: string): string | undefined {
    return held.get(this.heldKey(id))?.module;
  }

  /** The module id of a BullMQ id: branded ids are themselves, custom ids go through the alias hash. */
  async resolve(id: string): Promise<string | null> {
    if (isBranded(id)) {
      return id;
    }
    await this.waitUntilReady();
    return this.conn.hget(this.key('alias'), id);
  }

  protected async mustResolve(id: string, cmd: string): Promise<string> {
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

  /** The BullMQ ids of module ids: custom ids where the row's `k` (its ALIAS) names them. */
  protected async external(ids: string[]): Promise<string[]> {
    if (ids.length === 0) {
      return ids;
    }
    await this.waitUntilReady();
    // A row already gone keeps its module id.
    const p = this.conn.pipeline();
    for (const id of ids) {
      p.hget(this.jobKey(id), 'k');
    }
    const res = await replies(p);
    return ids.map((id, i) => (res[i] as string | null) ?? id);
  }

  /** Adds to `into` the custom id of each of `ids` that has one (none on a queue without). */
  protected async customIds(ids: string[], into: Map<string, string>): Promise<void> {
    if (ids.length === 0 || (await this.conn.exists(this.key('alias'))) === 0) {
      return;
    }
    const found = await this.external(ids);
    ids.forEach((id, i) => {
      if (found[i] !== id) {
        into.set(id, found[i]);
      }
    });
  }

  protected async stateOf(id: string): Promise<string | null> {
    return this.conn.hget(this.jobKey(id), 'st');
  }
}
