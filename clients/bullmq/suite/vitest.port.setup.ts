// BullMQ's ioredis-only files (sandboxed_process, connection) open some clients with a host
// alone, which ioredis sends to port 6379. The suite's server listens on a free port: make
// that ioredis's default port, in either mode, so those clients reach it.
import { DEFAULT_REDIS_OPTIONS } from 'ioredis/built/redis/RedisOptions';

const port = Number(process.env.REDIS_PORT);
if (!Number.isInteger(port) || port <= 0) {
  throw new Error('vitest.port.setup: REDIS_PORT names no port');
}
DEFAULT_REDIS_OPTIONS.port = port;
