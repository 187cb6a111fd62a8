import type { BackendFactory, QueueBaseOptions } from 'bullmq';
import { TrafikeyBackend, type TrafikeyConnection } from './backend.js';

/**
 * BullMQ's `BackendFactory` for trafikey: `opts.connection` is ioredis options or an ioredis
 * client (duplicated, so the application's own client is never closed by a backend). The
 * backends of a process share one command connection per connection setting.
 */
export const createTrafikeyBackend: BackendFactory<TrafikeyBackend, TrafikeyConnection> = (
  name: string,
  opts: QueueBaseOptions<TrafikeyConnection>,
  options?: { blocking?: boolean; withBlockingConnection?: boolean },
) =>
  new TrafikeyBackend({
    name,
    opts,
    blocking: options?.blocking,
    withBlockingConnection: options?.withBlockingConnection,
  });
