// The package's own exports replace BullMQ's: a typed app (fixtures/typed-app.ts, compiled under
// `tsc --strict` by `npm test`) runs on trafikey with its classes bound to it.
import { describe, expect, inject, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq';
import { Queue, Worker, Job, TrafikeyBackend, DelayedError } from '../src/index.js';
import { Mailer } from './fixtures/typed-app.js';

const connection = { host: '127.0.0.1', port: inject('port') };

describe('the package as BullMQ', () => {
  it('exports the classes bound to trafikey and the rest of BullMQ as it is', async () => {
    const q = new Queue(`typed-${randomUUID()}`, { connection });
    try {
      expect(q).toBeInstanceOf(BullQueue);
      expect(await q.backend).toBeInstanceOf(TrafikeyBackend);
      expect(Worker.prototype).toBeInstanceOf(BullWorker);
      expect(typeof Worker.RateLimitError).toBe('function');
      // Names of BullMQ that are not classes bound to a backend pass through unchanged.
      const bullmq = await import('bullmq');
      expect(Job).toBe(bullmq.Job);
      expect(DelayedError).toBe(bullmq.DelayedError);
    } finally {
      await q.close();
    }
  });

  it('runs a typed app switched by its import line', async () => {
    const app = new Mailer(connection, `typed-${randomUUID()}`);
    try {
      app.start(4);
      const ok = await app.send('ada@example.org');
      expect(await app.result(ok)).toEqual({ delivered: 'ada@example.org' });
      const bad = await app.send('bob@invalid');
      await expect(app.result(bad)).rejects.toThrow('cannot deliver to bob@invalid');
      expect(await app.counts()).toEqual({ completed: 1, failed: 1 });
      expect(app.board()).toBeDefined();
    } finally {
      await app.close();
    }
  });
});
