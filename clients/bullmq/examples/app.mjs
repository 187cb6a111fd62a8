// A small app on trafikey: a producer, a worker and QueueEvents, unchanged BullMQ code but
// for the module it imports the classes from ('trafikey-bullmq' in an app of its own).
//   npm run build && VALKEY_PORT=6379 node examples/app.mjs
import { Queue, Worker, QueueEvents } from '../dist/index.js';

const connection = { host: '127.0.0.1', port: Number(process.env.VALKEY_PORT ?? 6379) };

const queue = new Queue('mail', { connection });
const events = new QueueEvents('mail', { connection });
const worker = new Worker(
  'mail',
  async job => {
    await job.updateProgress(50);
    if (job.data.to.endsWith('@invalid')) {
      throw new Error(`cannot deliver to ${job.data.to}`);
    }
    return { delivered: job.data.to };
  },
  { connection, concurrency: 8 },
);

await queue.waitUntilReady();
await events.waitUntilReady();

const ok = await queue.add(
  'send',
  { to: 'ada@example.org' },
  { attempts: 3, backoff: { type: 'exponential', delay: 200 } },
);
const bad = await queue.add('send', { to: 'bob@invalid' }, { attempts: 2, backoff: { type: 'fixed', delay: 100 } });
// A custom id makes the add idempotent: the second add finds the first job.
await queue.add('send', { to: 'carol@example.org' }, { jobId: 'welcome-carol' });
await queue.add('send', { to: 'carol@example.org' }, { jobId: 'welcome-carol' });

console.log('ok  ->', await ok.waitUntilFinished(events));
await bad.waitUntilFinished(events).catch(err => console.log('bad ->', err.message));
console.log('counts', await queue.getJobCounts('completed', 'failed', 'waiting', 'active'));

await worker.close();
await events.close();
await queue.obliterate({ force: true });
await queue.close();
