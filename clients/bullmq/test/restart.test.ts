// A server restart under running BullMQ code: the clients reconnect by themselves, and what the
// server persisted (AOF) carries on, its delayed jobs promoted by the server after the restart.
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
  const worker = track(
    new Worker('restart', async job => {
      ran.push(job.name);
      return job.name;
    }, { connection }),
  );
  // The clients report the lost connection as `error` events; unhandled, they would throw.
  for (const c of [queue, events, worker]) {
    c.on('error', () => undefined);
  }
  const completed: string[] = [];
  events.on('completed', ({ returnvalue }) => completed.push(String(returnvalue)));
  await events.waitUntilReady();

  await queue.add('before', {});
  await until(() => ran.length === 1);
  // Due after the restart: it waits in the server's `delayed` set while the server is down.
  await queue.add('delayed', {}, { delay: 1500 });

  await stopServer(server);
  server = await startServer(args, server);

  await queue.add('after', {});
  await until(() => ran.length === 3, 15000);
  expect([...ran].sort()).toEqual(['after', 'before', 'delayed']);
  // Each ran once; QueueEvents, reading on from where it was, saw both completions after the restart.
  await until(() => completed.includes('after') && completed.includes('delayed'), 15000);
  expect(await queue.getJobCounts('completed', 'delayed', 'wait', 'active')).toEqual({ completed: 3, delayed: 0, wait: 0, active: 0 });
});
