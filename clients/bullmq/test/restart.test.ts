// A server restart under running BullMQ code: the clients reconnect by themselves, and what the
// server persisted (AOF) carries on: a job in a worker's hands finishes after the restart, and
// a delayed job is promoted by the server after it.
import { afterEach, expect, it } from 'vitest';
import { withBackend } from 'bullmq';
import { closeTracked, track, until } from './helpers.js';
import { install, modulePath, startServer, stopServer, type Server } from './server.js';
import { withTrafikey } from '../src/index.js';

const { Queue, Worker, QueueEvents } = withTrafikey(withBackend);

let server: Server | undefined;

afterEach(async () => {
  await closeTracked();
  if (server) {
    await stopServer(server);
  }
});

it('a queue, a worker and its events carry on across a server restart (AOF)', async () => {
  const args = ['--loadmodule', modulePath(), '--appendonly', 'yes'];
  server = await startServer(args);
  await install(server.port);
  const connection = { host: '127.0.0.1', port: server.port };
  const queue = track(new Queue('restart', { connection }));
  const events = track(new QueueEvents('restart', { connection }));
  const ran: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>(r => (open = r));
  const worker = track(
    new Worker(
      'restart',
      async job => {
        ran.push(job.name);
        if (job.name === 'held') {
          await gate;
        }
        return job.name;
      },
      { connection },
    ),
  );
  // The clients report the lost connection as `error` events; unhandled, they would throw.
  queue.on('error', () => undefined);
  events.on('error', () => undefined);
  worker.on('error', () => undefined);
  const completed: string[] = [];
  events.on('completed', ({ returnvalue }) => completed.push(String(returnvalue)));
  await events.waitUntilReady();

  await queue.add('before', {});
  await until(() => ran.length === 1);
  // In the worker's hands across the restart: its lease and token persist, and it finishes
  // after the restart, once.
  await queue.add('held', {});
  await until(() => ran.length === 2);
  // Due after the restart: it waits in the server's `delayed` set while the server is down.
  await queue.add('delayed', {}, { delay: 1500 });

  await stopServer(server);
  server = await startServer(args, server);

  await queue.add('after', {});
  open();
  await until(() => ran.length === 4, 15000);
  expect([...ran].sort()).toEqual(['after', 'before', 'delayed', 'held']);
  // QueueEvents, reading on from where it was, saw the completions after the restart.
  await until(() => ['held', 'delayed', 'after'].every(n => completed.includes(n)), 15000);
  expect(await queue.getJobCounts('completed', 'delayed', 'wait', 'active', 'failed')).toEqual({
    completed: 4,
    delayed: 0,
    wait: 0,
    active: 0,
    failed: 0,
  });
  // The held job's finish after the restart was taken: it was not handed out again.
  expect(ran.filter(n => n === 'held')).toHaveLength(1);
});
