// Moving a queue from BullMQ's own store to trafikey on the same server: fills queue `mail` on
// BullMQ's store with WAITING waiting jobs and 1 000 delayed ones, moves them with
// moveFromBullMQ, and prints its report and how long it took.
//   npm run build && VALKEY_PORT=6379 WAITING=20000 node examples/move.mjs
import { Queue as BullQueue, withBackend } from 'bullmq';
import { moveFromBullMQ, withTrafikey } from '../dist/index.js';

const connection = { host: '127.0.0.1', port: Number(process.env.VALKEY_PORT ?? 6379) };
const waiting = Number(process.env.WAITING ?? 20000);
const { Queue } = withTrafikey(withBackend);

const from = new BullQueue('mail', { connection });
const to = new Queue('mail', { connection });
for (let i = 0; i < waiting; i += 1000) {
  const n = Math.min(1000, waiting - i);
  await from.addBulk(Array.from({ length: n }, (_, j) => ({ name: 'send', data: { to: `user${i + j}@example.com` } })));
}
await from.addBulk(
  Array.from({ length: 1000 }, (_, j) => ({ name: 'remind', data: { n: j }, opts: { delay: 3_600_000 + j } })),
);

const started = process.hrtime.bigint();
const report = await moveFromBullMQ(from, to);
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
console.log({ ...report, left: report.left.length, seconds: Number(seconds.toFixed(2)) });
console.log('on trafikey:', await to.getJobCounts('wait', 'delayed'));

await to.obliterate({ force: true });
await from.obliterate({ force: true });
await Promise.all([from.close(), to.close()]);
