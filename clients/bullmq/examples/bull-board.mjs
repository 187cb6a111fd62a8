// bull-board on trafikey: BullMQ's dashboard (@bull-board/api with @bull-board/express) for
// queues whose backend is trafikey. The board reads and drives them through BullMQ's own Queue
// and Job, so it needs nothing from this package beyond the backend the queues were built with.
//   npm run build && VALKEY_PORT=6379 node examples/bull-board.mjs
// prints the board's URL. With DEMO=1 it first fills the queues `mail` and `reports` with jobs
// in every state (it obliterates them first: never on a server whose queues of those names
// matter). BOARD_PORT picks the board's port (default: a free one); it binds 127.0.0.1 only.
// What trafikey cannot serve answers the board with the backend's NotSupportedError, whose
// message names the missing feature: editing a job's data, flows. No adapter wrapper is
// needed.
import express from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';

/**
 * Serves bull-board for `queues` (BullMQ Queue instances) at `http://127.0.0.1:<port>/`.
 * Answers `{ url, close }`; port 0 picks a free port.
 */
export async function serveBoard(queues, { port = 0 } = {}) {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath('/');
  createBullBoard({
    queues: queues.map(q => new BullMQAdapter(q)),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'trafikey' } },
  });
  const app = express();
  app.use('/', serverAdapter.getRouter());
  const server = await new Promise((ok, fail) => {
    const s = app.listen(port, '127.0.0.1', err => (err ? fail(err) : ok(s)));
  });
  const url = `http://127.0.0.1:${server.address().port}/`;
  const close = () =>
    new Promise(ok => {
      server.closeAllConnections();
      server.close(() => ok());
    });
  return { url, close };
}

async function until(what, check) {
  for (let i = 0; i < 500; i++) {
    if (await check()) {
      return;
    }
    await new Promise(r => setTimeout(r, 20));
  }
  throw new Error(`bull-board demo: ${what} did not happen`);
}

/**
 * Jobs in every state BullMQ shows: in `mail`, completed, failed, active (held by a worker of
 * concurrency 1 until `release`), waiting, prioritized and delayed; `reports` is paused with
 * jobs waiting in it. `classes` are BullMQ's classes bound to trafikey (`withTrafikey`).
 * Answers the queues, the worker, the completed job and `release` (lets the active job finish).
 */
export async function seedDemo({ Queue, Worker }, connection, names = ['mail', 'reports']) {
  const [mail, reports] = names.map(n => new Queue(n, { connection }));
  for (const q of [mail, reports]) {
    await q.waitUntilReady();
    await q.obliterate({ force: true });
  }
  let release;
  const held = new Promise(r => (release = r));
  const worker = new Worker(
    mail.name,
    async job => {
      if (job.name === 'digest') {
        await job.updateProgress(40);
        await job.log('building the digest');
        await held;
      }
      if (job.data.to?.endsWith('@invalid')) {
        throw new Error(`cannot deliver to ${job.data.to}`);
      }
      return { delivered: job.data.to };
    },
    // metrics: the server counts finished jobs by the minute, which the board shows; the
    // worker's name is recorded in each job it takes, which the board shows with the job.
    { connection, concurrency: 1, metrics: { maxDataPoints: 1440 }, name: 'mailer-1' },
  );
  await worker.waitUntilReady();
  // One job at a time through the single slot, so each reaches its state before the next.
  const done = await mail.add('welcome', { to: 'ada@example.org' });
  await until('the completed job', async () => (await done.getState()) === 'completed');
  const failed = await mail.add('welcome', { to: 'bob@invalid' }, { attempts: 1 });
  await until('the failed job', async () => (await failed.getState()) === 'failed');
  const active = await mail.add('digest', { to: 'carol@example.org' });
  await until('the active job', async () => (await active.getState()) === 'active');
  await mail.add('newsletter', { to: 'dave@example.org' });
  await mail.add('newsletter', { to: 'erin@example.org' });
  await mail.add('receipt', { to: 'frank@example.org' }, { priority: 3 });
  await mail.add('reminder', { to: 'grace@example.org' }, { delay: 3_600_000 });
  await reports.pause();
  await reports.add('monthly', { month: '2026-11' });
  await reports.add('monthly', { month: '2026-12' });
  return { queues: [mail, reports], worker, completed: done, release };
}

// Run as a program: the board for the given server, optionally with the demo's jobs.
if (import.meta.url === (await import('node:url')).pathToFileURL(process.argv[1] ?? '').href) {
  const { withBackend } = await import('bullmq');
  const { withTrafikey } = await import('../dist/index.js');
  const classes = withTrafikey(withBackend);
  const connection = { host: '127.0.0.1', port: Number(process.env.VALKEY_PORT ?? 6379) };
  let queues;
  let demo;
  if (process.env.DEMO === '1') {
    demo = await seedDemo(classes, connection);
    queues = demo.queues;
  } else {
    queues = ['mail', 'reports'].map(n => new classes.Queue(n, { connection }));
  }
  const board = await serveBoard(queues, { port: Number(process.env.BOARD_PORT ?? 0) });
  console.log(`bull-board on ${board.url}`);
  process.once('SIGINT', async () => {
    demo?.release();
    await demo?.worker.close();
    await board.close();
    await Promise.all(queues.map(q => q.close()));
  });
}
