// BullMQ as a contender in trafikey's benchmark (tests/bench/bullmq.rs runs this file).
//
// Runs the benchmark's workloads with BullMQ's own API against the server the Rust tool
// started, and prints one JSON object per line on stdout, each with its own timings and the
// server's CPU taken from `INFO cpu` around the measured part:
//   {"workload":"enqueue","mode":"c50","jobs":N,"seconds":s,"cpu_us":u,"p50_us":a,"p99_us":b}
//   {"workload":"memory","jobs":M,"bytes":d}
//   {"error":"..."}
// Everything else (progress, warnings) goes to stderr.
//
// Usage: node bench.mjs --port P [--n N] [--mem M] [--conns 50] [--batch 32]
//                      [--deadline-s 120] [--only enqueue,claim,lifecycle,memory,wake,lateness]
//                      [--wait-jobs 3000] [--gap-ms 2] [--wait-workers 2]
//                      [--wait-concurrency 4] [--delay-min 50] [--delay-max 500]
//                      [--events on|off] [--best-only] [--replica-port P]
//                      [--backend redis|trafikey --trafikey-client PATH]
//
// --events off: the production mode "events off" as far as BullMQ allows it: every Queue
// opened with `streams.events.maxLen` 0 (its scripts still XADD each event, then trim the
// stream to ~0), and jobs added with `removeOnComplete: 1000` (completed jobs kept as
// trafikey keeps them, `trafikey.keep-completed` 1000). --best-only: only the "best" mode.
// --replica-port: the replica's CPU is read around each phase too (as "replica_cpu_us"),
// once the replica has caught up with the primary's replication offset.
//
// Modes: "c50" is 50 connections, each waiting for its reply before the next call (50 Queue
// objects calling add, 50 Workers of concurrency 1); "best" is BullMQ's fastest documented
// way: addBulk in batches of --batch from 50 Queue objects, and one Worker at concurrency 50.
// The claim part also runs that one Worker with a `name` (BullMQ records it in each job it
// takes, `processedBy`), as the workload "claim+complete named", unless --best-only.
// "waiting" (the parts wake and lateness, not in the default set) is --wait-workers Workers of
// --wait-concurrency, idle on an empty queue, fed one add every --gap-ms: wake = add sent →
// processor start; lateness = add sent + delay → processor start, the delay of job j spread
// over --delay-min..--delay-max as the Rust tool spreads trafikey's (tests/bench/waiting.rs).
// Between workloads the server is flushed; the caller re-installs what it needs afterwards.
//
// --backend trafikey: the same workloads with BullMQ's classes bound to the trafikey backend
// (package trafikey-bullmq, clients/bullmq; --trafikey-client is its built dist/index.js):
// `withTrafikey(withBackend)` gives Queue and Worker, nothing else changes. The server must
// have the module loaded; after each flush this re-installs the wire identity
// (`EMQ.INSTALL 1 {emq}:version`).

import * as bullmq from 'bullmq';
import IORedis from 'ioredis';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

function parseArgs(argv) {
  const o = {
    port: 0, n: 10000, mem: 100000, conns: 50, batch: 32, deadlineS: 120, only: null,
    waitJobs: 3000, gapMs: 2, waitWorkers: 2, waitConcurrency: 4, delayMin: 50, delayMax: 500,
    events: true, bestOnly: false, replicaPort: 0, backend: 'redis', trafikeyClient: '',
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    switch (k) {
      case '--port': o.port = Number(v); i++; break;
      case '--n': o.n = Number(v); i++; break;
      case '--mem': o.mem = Number(v); i++; break;
      case '--conns': o.conns = Number(v); i++; break;
      case '--batch': o.batch = Number(v); i++; break;
      case '--deadline-s': o.deadlineS = Number(v); i++; break;
      case '--only': o.only = new Set(v.split(',')); i++; break;
      case '--wait-jobs': o.waitJobs = Number(v); i++; break;
      case '--gap-ms': o.gapMs = Number(v); i++; break;
      case '--wait-workers': o.waitWorkers = Number(v); i++; break;
      case '--wait-concurrency': o.waitConcurrency = Number(v); i++; break;
      case '--delay-min': o.delayMin = Number(v); i++; break;
      case '--delay-max': o.delayMax = Number(v); i++; break;
      case '--events': o.events = v !== 'off'; i++; break;
      case '--best-only': o.bestOnly = true; break;
      case '--replica-port': o.replicaPort = Number(v); i++; break;
      case '--backend': o.backend = v; i++; break;
      case '--trafikey-client': o.trafikeyClient = v; i++; break;
      default: throw new Error(`unknown argument ${k}`);
    }
  }
  if (!o.port) throw new Error('--port is required');
  if (o.backend !== 'redis' && o.backend !== 'trafikey') throw new Error(`unknown backend ${o.backend}`);
  if (o.backend === 'trafikey' && !o.trafikeyClient) throw new Error('--backend trafikey needs --trafikey-client');
  return o;
}

const opts = parseArgs(process.argv.slice(2));
// BullMQ's own classes: on its Redis backend, or bound to trafikey's (the one line a user changes).
const { Queue, Worker } =
  opts.backend === 'trafikey'
    ? (await import(pathToFileURL(opts.trafikeyClient).href)).withTrafikey(bullmq.withBackend)
    : bullmq;
const connection = { host: '127.0.0.1', port: opts.port };
const ctl = new IORedis({ host: '127.0.0.1', port: opts.port, maxRetriesPerRequest: 3 });
const rep = opts.replicaPort ? new IORedis({ host: '127.0.0.1', port: opts.replicaPort, maxRetriesPerRequest: 3 }) : null;
const wanted = (w) => !opts.only || opts.only.has(w);
// The waiting parts run only when asked for by name.
const asked = (w) => opts.only && opts.only.has(w);
const log = (...a) => process.stderr.write(`bullmq: ${a.join(' ')}\n`);
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

function infoField(text, field) {
  const m = text.match(new RegExp(`^${field}:([0-9.]+)`, 'm'));
  if (!m) throw new Error(`no ${field} in INFO`);
  return Number(m[1]);
}

async function serverCpuUs() {
  const t = await ctl.info('cpu');
  return Math.round((infoField(t, 'used_cpu_sys') + infoField(t, 'used_cpu_user')) * 1e6);
}

async function cpuOf(c) {
  const t = await c.info('cpu');
  return Math.round((infoField(t, 'used_cpu_sys') + infoField(t, 'used_cpu_user')) * 1e6);
}

// The primary's CPU and the replica's (if any) now.
async function cpuNow() {
  return { p: await cpuOf(ctl), r: rep ? await cpuOf(rep) : null };
}

// The end of a measured part: the replica caught up with the primary's offset, then both CPUs.
async function cpuEnd() {
  if (rep) {
    const t0 = performance.now();
    for (;;) {
      const p = infoField(await ctl.info('replication'), 'master_repl_offset');
      const r = infoField(await rep.info('replication'), 'master_repl_offset');
      if (r >= p) break;
      if (performance.now() - t0 > 60000) throw new Error(`the replica did not catch up (${r} of ${p})`);
      await new Promise((res) => setTimeout(res, 1));
    }
  }
  return cpuNow();
}

function cpuDelta(a, b) {
  return { cpu_us: b.p - a.p, replica_cpu_us: a.r === null ? null : b.r - a.r };
}

async function usedMemory() {
  return infoField(await ctl.info('memory'), 'used_memory');
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

function summary(latenciesMs) {
  const a = Float64Array.from(latenciesMs).sort();
  return { p50_us: Math.round(percentile(a, 50) * 1000), p99_us: Math.round(percentile(a, 99) * 1000) };
}

function withDeadline(promise, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: deadline of ${opts.deadlineS}s passed`)), opts.deadlineS * 1000);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

async function fresh() {
  await ctl.flushall('SYNC');
  if (opts.backend === 'trafikey') await ctl.call('EMQ.INSTALL', '1', '{emq}:version');
}

// Split n jobs over k producers as evenly as possible.
function shares(n, k) {
  return Array.from({ length: k }, (_, i) => Math.floor(n / k) + (i < n % k ? 1 : 0));
}

const QNAME = 'bench';
const JOB_NAME = 'bench';
const DATA = {};

// Events off: the events stream capped at 0, completed jobs kept as trafikey keeps them.
const queueOpts = opts.events
  ? { connection }
  : { connection, streams: { events: { maxLen: 0 } }, defaultJobOptions: { removeOnComplete: 1000 } };

async function openQueues(k) {
  const qs = Array.from({ length: k }, () => new Queue(QNAME, queueOpts));
  await Promise.all(qs.map((q) => q.waitUntilReady()));
  return qs;
}

async function closeAll(xs) {
  await Promise.all(xs.map((x) => x.close()));
}

// Producers: `k` Queue objects, each adding its share one call at a time (bulk = 0) or in
// addBulk batches. `started` records, per job id, when its add call was sent.
async function produce(qs, n, bulk, started, lat) {
  const per = shares(n, qs.length);
  await Promise.all(
    qs.map(async (q, i) => {
      let left = per[i];
      while (left > 0) {
        const t0 = performance.now();
        if (bulk > 0) {
          const m = Math.min(bulk, left);
          const jobs = await q.addBulk(Array.from({ length: m }, () => ({ name: JOB_NAME, data: DATA })));
          const t1 = performance.now();
          lat.push(t1 - t0);
          if (started) for (const j of jobs) started.set(j.id, t0);
          left -= m;
        } else {
          const job = await q.add(JOB_NAME, DATA);
          const t1 = performance.now();
          lat.push(t1 - t0);
          if (started) started.set(job.id, t0);
          left -= 1;
        }
      }
    }),
  );
}

// Prefill n waiting jobs (not measured).
async function prefill(n) {
  const [q] = await openQueues(1);
  let left = n;
  while (left > 0) {
    const m = Math.min(1000, left);
    await q.addBulk(Array.from({ length: m }, () => ({ name: JOB_NAME, data: DATA })));
    left -= m;
  }
  await q.close();
}

// Workers that are connected but not yet running: `count` Workers of `concurrency` each,
// a no-op processor. Resolves `done` when n jobs have completed.
async function openWorkers(count, concurrency, n, onStart, onDone, name) {
  let completed = 0;
  let resolveDone;
  let rejectDone;
  const done = new Promise((res, rej) => {
    resolveDone = res;
    rejectDone = rej;
  });
  const workers = Array.from(
    { length: count },
    () =>
      new Worker(
        QNAME,
        async (job) => {
          onStart(job.id);
        },
        { connection, concurrency, autorun: false, ...(name ? { name } : {}) },
      ),
  );
  for (const w of workers) {
    w.on('completed', (job) => {
      onDone(job.id);
      completed += 1;
      if (completed === n) resolveDone(performance.now());
    });
    w.on('failed', (job, err) => rejectDone(new Error(`job ${job && job.id} failed: ${err && err.message}`)));
    w.on('error', (err) => log(`worker error: ${err && err.message}`));
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  return { workers, done };
}

async function enqueue(mode) {
  await fresh();
  const bulk = mode === 'best' ? opts.batch : 0;
  const qs = await openQueues(opts.conns);
  const lat = [];
  const cpu0 = await cpuNow();
  const t0 = performance.now();
  await withDeadline(produce(qs, opts.n, bulk, null, lat), `enqueue ${mode}`);
  const t1 = performance.now();
  const cpu1 = await cpuEnd();
  await closeAll(qs);
  return { workload: 'enqueue', mode, jobs: opts.n, seconds: (t1 - t0) / 1000, ...cpuDelta(cpu0, cpu1), latency: 'add call', ...summary(lat) };
}

async function claimComplete(mode, name) {
  await fresh();
  await prefill(opts.n);
  const started = new Map();
  const lat = [];
  const [count, conc] = mode === 'best' ? [1, opts.conns] : [opts.conns, 1];
  const { workers, done } = await openWorkers(
    count,
    conc,
    opts.n,
    (id) => started.set(id, performance.now()),
    (id) => {
      const s = started.get(id);
      if (s !== undefined) lat.push(performance.now() - s);
    },
    name,
  );
  const cpu0 = await cpuNow();
  const t0 = performance.now();
  for (const w of workers) w.run().catch((e) => log(`worker run: ${e.message}`));
  const t1 = await withDeadline(done, `claim+complete ${mode}${name ? ' named' : ''}`);
  const cpu1 = await cpuEnd();
  await closeAll(workers);
  return {
    workload: name ? 'claim+complete named' : 'claim+complete',
    mode,
    jobs: opts.n,
    seconds: (t1 - t0) / 1000,
    ...cpuDelta(cpu0, cpu1),
    latency: 'processor start to completed event',
    ...summary(lat),
  };
}

async function lifecycle(mode) {
  await fresh();
  const bulk = mode === 'best' ? opts.batch : 0;
  const [count, conc] = mode === 'best' ? [1, opts.conns] : [opts.conns, 1];
  const added = new Map();
  const finished = new Map();
  const { workers, done } = await openWorkers(
    count,
    conc,
    opts.n,
    () => {},
    (id) => finished.set(id, performance.now()),
  );
  const qs = await openQueues(opts.conns);
  const addLat = [];
  const cpu0 = await cpuNow();
  const t0 = performance.now();
  for (const w of workers) w.run().catch((e) => log(`worker run: ${e.message}`));
  await withDeadline(produce(qs, opts.n, bulk, added, addLat), `lifecycle ${mode} producers`);
  const t1 = await withDeadline(done, `lifecycle ${mode}`);
  const cpu1 = await cpuEnd();
  await closeAll(workers);
  await closeAll(qs);
  const lat = [];
  for (const [id, s] of added) {
    const f = finished.get(id);
    if (f !== undefined) lat.push(f - s);
  }
  return {
    workload: 'lifecycle',
    mode,
    jobs: opts.n,
    seconds: (t1 - t0) / 1000,
    ...cpuDelta(cpu0, cpu1),
    latency: 'add sent to completed event',
    ...summary(lat),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The delay of the j-th job, ms: the same spread as trafikey's (waiting.rs, delay_ms).
function delayOf(j) {
  return opts.delayMin + ((j * 7919) % (opts.delayMax - opts.delayMin + 1));
}

// Waiting Workers fed one job at a time: kind 'wake' (no delay) or 'lateness' (delayOf(j)).
// Latency per job: processor start − (add sent + delay), on performance.now().
async function waiting(kind) {
  await fresh();
  const jobs = opts.waitJobs;
  const lat = [];
  let early = 0;
  let completed = 0;
  let resolveDone;
  let rejectDone;
  const done = new Promise((res, rej) => {
    resolveDone = res;
    rejectDone = rej;
  });
  const workers = Array.from(
    { length: opts.waitWorkers },
    () =>
      new Worker(
        QNAME,
        async (job) => {
          const late = performance.now() - (job.data.t + job.data.d);
          if (late < 0) early += 1;
          lat.push(Math.max(0, late));
        },
        { connection, concurrency: opts.waitConcurrency, autorun: false },
      ),
  );
  for (const w of workers) {
    w.on('completed', () => {
      completed += 1;
      if (completed === jobs) resolveDone(performance.now());
    });
    w.on('failed', (job, err) => rejectDone(new Error(`job ${job && job.id} failed: ${err && err.message}`)));
    w.on('error', (err) => log(`worker error: ${err && err.message}`));
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  const [q] = await openQueues(1);
  for (const w of workers) w.run().catch((e) => log(`worker run: ${e.message}`));
  // Every Worker waiting (its blocking connection in BZPOPMIN) before the first add.
  const t00 = performance.now();
  while (infoField(await ctl.info('clients'), 'blocked_clients') < opts.waitWorkers) {
    if (performance.now() - t00 > 10000) throw new Error(`${kind}: the Workers did not start waiting`);
    await sleep(2);
  }
  const cpu0 = await serverCpuUs();
  const t0 = performance.now();
  const produce = async () => {
    for (let j = 0; j < jobs; j++) {
      const d = kind === 'wake' ? 0 : delayOf(j);
      const t = performance.now();
      await q.add(JOB_NAME, { t, d }, d > 0 ? { delay: d } : {});
      const next = t0 + opts.gapMs * (j + 1);
      const now = performance.now();
      if (next > now) await sleep(next - now);
    }
  };
  await withDeadline(produce(), `${kind} producer`);
  const t1 = await withDeadline(done, kind);
  const cpu1 = await serverCpuUs();
  await closeAll(workers);
  await q.close();
  if (early > 0) log(`${kind}: ${early} jobs started before add sent + delay (counted as 0)`);
  return {
    workload: kind,
    mode: 'waiting',
    jobs,
    seconds: (t1 - t0) / 1000,
    cpu_us: cpu1 - cpu0,
    early,
    latency: kind === 'wake' ? 'add sent to processor start' : 'add sent + delay to processor start',
    ...summary(lat),
  };
}

async function memory() {
  await fresh();
  const [q] = await openQueues(1);
  const m0 = await usedMemory();
  let left = opts.mem;
  while (left > 0) {
    const m = Math.min(1000, left);
    await q.addBulk(Array.from({ length: m }, () => ({ name: JOB_NAME, data: DATA })));
    left -= m;
  }
  const m1 = await usedMemory();
  await q.close();
  return { workload: 'memory', jobs: opts.mem, bytes: m1 - m0 };
}

async function main() {
  const steps = [];
  const modes = opts.bestOnly ? ['best'] : ['c50', 'best'];
  if (wanted('enqueue')) steps.push(...modes.map((m) => () => enqueue(m)));
  if (wanted('claim')) steps.push(...modes.map((m) => () => claimComplete(m)));
  if (wanted('claim') && !opts.bestOnly) steps.push(() => claimComplete('best', 'bench-worker'));
  if (wanted('lifecycle')) steps.push(...modes.map((m) => () => lifecycle(m)));
  if (wanted('memory')) steps.push(() => memory());
  if (asked('wake')) steps.push(() => waiting('wake'));
  if (asked('lateness')) steps.push(() => waiting('lateness'));
  let failed = false;
  for (const step of steps) {
    try {
      const r = await step();
      log(`${r.workload} ${r.mode || ''} done`);
      emit(r);
    } catch (e) {
      failed = true;
      emit({ error: String((e && e.message) || e) });
    }
  }
  await fresh();
  await ctl.quit();
  if (rep) await rep.quit();
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  emit({ error: String((e && e.stack) || e) });
  process.exit(1);
});
