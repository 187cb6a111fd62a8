// A BullMQ 6 queue backend on Valkey with the trafikey module (wire echomq:6.0.0).
//
// The backend is one class built in layers, each file one group of BullMQ's own classes:
//   queue-base.ts     identity, keys, connections, the server check, ids and held tokens
//   queue-getters.ts  reads: states, job data, counts, ranges, logs, metrics, limits, meta
//   job.ts            one job's calls: data, progress, logs, delay, priority, remove, retry
//   worker.ts         a worker's: claims, leases, finishing (batched), failing, stalls
//   queue.ts          a queue's: adding, pause, drain, clean, obliterate, meta and limits
//   job-scheduler.ts  job schedulers
//   backend.ts        this class: events, and backends for other queues on its connections
// Beside them: commands.ts builds every module call (keys in the module's order),
// connection.ts shares connections and batches writes, events.ts translates events, and
// job-data.ts reads a row as BullMQ's JobJson.
//
// Only bullmq's types are imported: this code also runs inside BullMQ's own source checkout,
// where a runtime `bullmq` would be a second copy of the classes.
import type { IQueueBackend, QueueBaseOptions, StreamReadRaw } from 'bullmq';
import type { TrafikeyConnection } from './connection.js';
import { namedAliases, parseEntries, translate } from './events.js';
import { JobSchedulerMethods } from './job-scheduler.js';
import { replies } from './reply.js';

export { keepArgs } from './commands.js';
export type { TrafikeyConnection } from './connection.js';
export { MODULE_MAJOR, MODULE_VERSION, NotSupportedError, WIRE } from './queue-base.js';
export type { TrafikeyBackendOptions } from './queue-base.js';

/** Aliases remembered from events read (module id → custom id), at most this many. */
const ALIASES_MAX = 10000;

export class TrafikeyBackend extends JobSchedulerMethods implements IQueueBackend {
  /** Aliases named by events this backend read (module id → custom id), the newest kept. */
  private readonly aliases = new Map<string, string>();

  forQueue(queueName: string, prefix?: string): IQueueBackend {
    return new TrafikeyBackend(
      {
        name: queueName,
        opts: { ...this.opts, prefix: prefix ?? this.prefix } as QueueBaseOptions<TrafikeyConnection>,
      },
      { conn: this.conn, blockingConn: this.blockingConn },
    );
  }

  // ---------------------------------------------------------------- events

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

  private rememberAlias(id: string, alias: string): void {
    this.aliases.set(id, alias);
    if (this.aliases.size > ALIASES_MAX) {
      this.aliases.delete(this.aliases.keys().next().value as string);
    }
  }

  /**
   * Reads `<Q>:events` in BullMQ's event vocabulary (events.ts): the ids BullMQ knows the jobs
   * by, and the payloads events leave to the row, are read here.
   */
  async readEvents(id: string, blockTimeout: number): Promise<StreamReadRaw> {
    await this.waitUntilReady();
    // Until a read returns entries, QueueEvents asks for `$` again: it still means the newest
    // event at ready.
    const from = id === '$' && this.eventsFrom !== undefined ? this.eventsFrom : id;
    const raw = (await this.conn.xread(
      'BLOCK',
      Math.max(0, Math.floor(blockTimeout)),
      'STREAMS',
      this.key('events'),
      from,
    )) as [string, [string, string[]][]][] | null;
    if (!raw || raw.length === 0) {
      return raw;
    }
    this.eventsFrom = undefined;
    const [stream, entries] = raw[0];
    const { parsed, ids, needs } = parseEntries(entries);
    const p = this.conn.pipeline();
    for (const n of needs) {
      p.hget(this.jobKey(n.id), n.kind);
    }
    // `added`/`delayed` carry the alias, and a live row has it in `k`; what an event names is
    // remembered, for rows already gone by the time `completed` is read.
    for (const [jid, alias] of namedAliases(parsed)) {
      this.rememberAlias(jid, alias);
    }
    const idList = [...ids].filter(x => !this.aliases.has(x));
    for (const x of idList) {
      p.hget(this.jobKey(x), 'k');
    }
    const res = needs.length + idList.length > 0 ? await replies(p) : [];
    const payload = new Map<string, string | null>();
    needs.forEach((n, i) => payload.set(`${n.kind}:${n.id}`, (res[i] as string | null) ?? null));
    const rev = new Map<string, string>();
    idList.forEach((x, i) => rev.set(x, (res[needs.length + i] as string | null) ?? x));
    for (const x of ids) {
      const a = this.aliases.get(x);
      if (a !== undefined) {
        rev.set(x, a);
      }
    }
    return [[stream, translate(parsed, rev, payload)]];
  }
}
