// trafikey-bullmq: BullMQ's public names, its classes bound to trafikey. An application changes
// `from 'bullmq'` to `from 'trafikey-bullmq'` and nothing else.
import type { BackendFactory, IQueueBackend } from 'bullmq';
import { createTrafikeyBackend } from './factory.js';

// Every public name of BullMQ (its errors, enums, types, `Job`, …); the names declared below
// take the place of BullMQ's own of the same name.
export * from 'bullmq';
export { Queue, Worker, QueueEvents, QueueEventsProducer, FlowProducer } from './bound.js';
export { createTrafikeyBackend } from './factory.js';
export { TrafikeyBackend, NotSupportedError, WIRE, MODULE_MAJOR, MODULE_VERSION, keepArgs } from './backend.js';
export type { TrafikeyConnection } from './backend.js';
export { escapeQueueName, isBranded, mintJobId } from './keys.js';
export { moveFromBullMQ, movedId } from './move.js';
export type { MovableQueue, MoveOptions, MoveReport } from './move.js';

/** BullMQ's `withBackend`, passed in so that this package never loads a second bullmq. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- its classes are typed by the application's bullmq
export type WithBackend = <B extends IQueueBackend, C>(factory: BackendFactory<B, C>) => any;

/**
 * BullMQ's classes (`Queue`, `Worker`, `QueueEvents`, …) bound to trafikey, the form of BullMQ's
 * own `withBackend`: `const { Queue, Worker } = withTrafikey(withBackend)` with `withBackend`
 * from 'bullmq'. Without an argument, bullmq is imported from the application's dependencies.
 * The classes this package exports (`import { Queue } from 'trafikey-bullmq'`) are the same
 * binding, usable as types too.
 */
export function withTrafikey<W extends WithBackend>(withBackend: W): ReturnType<W>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- bullmq's classes, as the application's bullmq types them
export function withTrafikey(): Promise<any>;
export function withTrafikey(withBackend?: WithBackend): unknown {
  if (withBackend) {
    return withBackend(createTrafikeyBackend);
  }
  return import('bullmq').then(m => m.withBackend(createTrafikeyBackend));
}
