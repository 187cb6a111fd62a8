import type { BackendFactory, IQueueBackend, QueueBaseOptions } from 'bullmq';
import { TrafikeyBackend, type TrafikeyConnection } from './backend.js';

export { TrafikeyBackend, NotSupportedError, WIRE, MODULE_MAJOR, keepArgs } from './backend.js';
export type { TrafikeyConnection } from './backend.js';
export { escapeQueueName, isBranded, mintJobId } from './keys.js';
export { moveFromBullMQ, movedId } from './move.js';
export type { MovableQueue, MoveOptions, MoveReport } from './move.js';

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

/** BullMQ's `withBackend`, passed in so that this package never loads a second bullmq. */
export type WithBackend = <B extends IQueueBackend, C>(factory: BackendFactory<B, C>) => any;

/**
 * BullMQ's classes (`Queue`, `Worker`, `QueueEvents`, …) bound to trafikey:
 * `const { Queue, Worker } = withTrafikey(withBackend)` with `withBackend` from 'bullmq'.
 * Without an argument, bullmq is imported from the application's own dependencies.
 */
export function withTrafikey<W extends WithBackend>(withBackend: W): ReturnType<W>;
export function withTrafikey(): Promise<any>;
export function withTrafikey(withBackend?: WithBackend): any {
  if (withBackend) {
    return withBackend(createTrafikeyBackend);
  }
  return import('bullmq').then(m => m.withBackend(createTrafikeyBackend));
}
