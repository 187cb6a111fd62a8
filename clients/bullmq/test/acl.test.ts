// BullMQ code under a least-privilege ACL user: the recipe in the README, as written, lets a
// producer, a worker and QueueEvents run their queue, and nothing of another queue.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { withBackend } from 'bullmq';
import { Redis } from 'ioredis';
import { closeTracked, track, until } from './helpers.js';
import { escapeQueueName, withTrafikey } from '../src/index.js';

const port = inject('port');
const { Queue, Worker, QueueEvents } = withTrafikey(withBackend);
const name = `acl-${randomUUID()}`;
const user = `bullmq-${randomUUID()}`;

/** The README's recipe for one queue (`bull:<name>` escaped as the backend escapes it). */
function recipe(u: string, queue: string): string[] {
  const keys = `emq:{${escapeQueueName(queue)}}:*`;
  return [
    'ACL',
    'SETUSER',
    u,
    'reset',
    'on',
    '>pw',
    'resetkeys',
    'resetchannels',
    '%R~{emq}:version',
    `~${keys}`,
    '-@all',
    '+@emq',
    '+hget',
    '+hmget',
    '+hgetall',
    '+hexists',
    '+hset',
    '+hdel',
    '+get',
    '+set',
    '+del',
    '+exists',
    '+lrange',
    '+llen',
    '+ltrim',
    '+zrange',
    '+zrevrange',
    '+zrangebyscore',
    '+zcount',
    '+pttl',
    '+xadd',
    '+xtrim',
    '+xrange',
    '+xrevrange',
    '+xread',
    '+multi',
    '+exec',
    '+ping',
    '+info',
    '+time',
    '+client|id',
    '+client|setname',
    '+client|setinfo',
    '+client|unblock',
  ];
}

let admin: Redis;

beforeAll(async () => {
  admin = new Redis({ host: '127.0.0.1', port });
  await admin.call(...(recipe(user, `bull:${name}`) as [string, ...string[]]));
});

afterAll(async () => {
  await closeTracked();
  const q = new Queue(name, { connection: { host: '127.0.0.1', port } });
  await q.obliterate({ force: true }).catch(() => undefined);
  await q.close();
  await admin.call('ACL', 'DELUSER', user);
  admin.disconnect();
});

it('the README gives the same recipe', () => {
  const readme = readFileSync(resolve(__dirname, '../README.md'), 'utf8');
  const line = readme.split('\n').find(l => l.startsWith('ACL SETUSER mailer '));
  expect(line).toBe(recipe('mailer', 'bull:mail').join(' '));
});

describe('an ACL user made by the recipe', () => {
  const connection = () => ({ host: '127.0.0.1', port, username: user, password: 'pw' });

  it('adds, works, reports and watches its queue', async () => {
    const queue = track(new Queue(name, { connection: connection() }));
    const events = track(new QueueEvents(name, { connection: connection() }));
    await events.waitUntilReady();
    const worker = track(
      new Worker(
        name,
        async job => {
          await job.updateProgress(50);
          await job.log('half way');
          if (job.data.fail) {
            throw new Error('no');
          }
          return job.data.n * 2;
        },
        { connection: connection(), concurrency: 4 },
      ),
    );
    const one = await queue.add('double', { n: 21 });
    expect(await one.waitUntilFinished(events)).toBe(42);
    await queue.addBulk([
      { name: 'double', data: { n: 1 }, opts: { priority: 2 } },
      { name: 'double', data: { n: 2 }, opts: { delay: 200 } },
      { name: 'double', data: { fail: true }, opts: { attempts: 2, backoff: 50 } },
    ]);
    await until(async () => {
      const c = await queue.getJobCounts('completed', 'failed');
      return c.completed === 3 && c.failed === 1;
    });
    expect(await queue.getJobCounts('completed', 'failed', 'wait', 'delayed', 'active')).toEqual({
      completed: 3,
      failed: 1,
      wait: 0,
      delayed: 0,
      active: 0,
    });
    const [failed] = await queue.getJobs(['failed']);
    expect(failed.attemptsMade).toBe(2);
    expect((await queue.getJobLogs(one.id!)).logs).toEqual(['half way']);
    await worker.close();
    await failed.retry();
    expect(await failed.getState()).toBe('waiting');
    // A rate limit set by hand, read back as its time to live (PTTL of the limiter key).
    await queue.rateLimit(60_000);
    expect(await queue.getRateLimitTtl()).toBeGreaterThan(0);
    await queue.removeRateLimitKey();
    await queue.pause();
    expect(await queue.isPaused()).toBe(true);
    await queue.resume();
    await queue.drain();
    await queue.clean(0, 100, 'completed');
    expect(await queue.getJobCounts('completed', 'wait')).toEqual({ completed: 0, wait: 0 });
    // Nothing was refused along the way, not even what a client passes over (a refused read
    // must not look like an empty answer).
    const log = (await admin.call('ACL', 'LOG', '128')) as string[][];
    const refused = log
      .map(e => Object.fromEntries(e.flatMap((v, i) => (i % 2 === 0 ? [[v, e[i + 1]]] : []))))
      .filter(e => e.username === user)
      .map(e => `${e.reason} ${e.object}`);
    expect(refused).toEqual([]);
  });

  it('a named worker names its jobs, refused nothing', async () => {
    const queue = track(new Queue(name, { connection: connection() }));
    const jobs = 200;
    await queue.addBulk(Array.from({ length: jobs }, (_, i) => ({ name: 'n', data: { i } })));
    let done = 0;
    track(new Worker(name, async () => void done++, { connection: connection(), name: 'named', concurrency: 50 }));
    await until(async () => done === jobs && (await queue.getCompletedCount()) === jobs);
    const [job] = await queue.getCompleted(0, 0);
    expect(job.processedBy).toBe('named');
    // The claims' BY put the name in each row: nothing kept beside.
    expect(await admin.exists(`emq:{${escapeQueueName(`bull:${name}`)}}:b:pb`)).toBe(0);
    const log = (await admin.call('ACL', 'LOG', '128')) as string[][];
    expect(log.filter(e => e[e.indexOf('username') + 1] === user)).toEqual([]);
  });

  it('is refused another queue', async () => {
    const other = track(new Queue(`other-${randomUUID()}`, { connection: connection() }));
    await expect(other.add('x', {})).rejects.toThrow(/NOPERM/);
  });
});
