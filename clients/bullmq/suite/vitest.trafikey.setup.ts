// Makes trafikey the process-wide default backend of BullMQ's suite. Tests build their
// Queue/Worker/QueueEvents normally; every backend then talks to the Valkey with the module.
import { Redis } from 'ioredis';
import { createIORedisClient } from './src/classes/ioredis-client';
import { setConnectionFactory } from './tests/utils/connection-factory';
import { setDefaultBackendFactory } from './src/utils/create-backend';
import { createTrafikeyBackend } from './trafikey/src/factory';

const host = '127.0.0.1';
const port = Number(process.env.REDIS_PORT);

setConnectionFactory(() => createIORedisClient(new Redis({ host, port, maxRetriesPerRequest: null })));

process.env.BULLMQ_TEST_BACKEND = 'trafikey';

const trafikey: typeof createTrafikeyBackend = (name, opts, options) =>
  createTrafikeyBackend(name, { ...opts, connection: { host, port } }, options);
// The checkout's BackendFactory and the one this package is typed with (the bullmq package's)
// are two copies of one type.
setDefaultBackendFactory(trafikey as unknown as Parameters<typeof setDefaultBackendFactory>[0]);
