// BullMQ's classes bound to trafikey, usable as values and as types, so that an application
// switches by changing the module it imports from: `import { Queue, Worker } from
// 'trafikey-bullmq'` in place of `from 'bullmq'`. Each class is BullMQ's own, constructed with
// this package's backend; nothing else of it changes.
/* eslint-disable @typescript-eslint/no-explicit-any -- BullMQ's classes and type rules default their
   type parameters to any: the bound classes keep those defaults, to be assignable wherever BullMQ's own are */
import {
  FlowProducer as BullFlowProducer,
  Queue as BullQueue,
  QueueEvents as BullQueueEvents,
  QueueEventsProducer as BullQueueEventsProducer,
  Worker as BullWorker,
  type BackendFactory,
  type ConnectionOptions,
  type FlowProducerOptions,
  type Job,
  type JobProgress,
  type Processor,
  type QueueEventsOptions,
  type QueueEventsProducerOptions,
  type QueueOptions,
  type WorkerOptions,
} from 'bullmq';
import { createTrafikeyBackend } from './factory.js';

// BullMQ's own rules for a queue's job types (not among its exported names).
type ExtractDataType<DataTypeOrJob, Default> = DataTypeOrJob extends Job<infer D, any, any> ? D : Default;
type ExtractResultType<DataTypeOrJob, Default> = DataTypeOrJob extends Job<any, infer R, any> ? R : Default;
type ExtractNameType<DataTypeOrJob, Default extends string> =
  DataTypeOrJob extends Job<any, any, infer N> ? N : Default;

/** Without options, BullMQ connects to 127.0.0.1:6379; so does ioredis with none. */
const local = () => ({ connection: {} });

// The classes keep BullMQ's connection type and leave the backend's open (`any`): a bound class
// is then assignable wherever BullMQ's own class is expected (bull-board's adapters, an
// application's fields typed by BullMQ), whose defaults name BullMQ's Redis backend. The backend
// takes the ioredis options or client BullMQ's connection type describes.
const trafikey = createTrafikeyBackend as unknown as BackendFactory<any, ConnectionOptions>;

/** BullMQ's `Queue` on trafikey. */
export class Queue<
  DataTypeOrJob = any,
  DefaultResultType = any,
  DefaultNameType extends string = string,
  DataType = ExtractDataType<DataTypeOrJob, DataTypeOrJob>,
  ResultType = ExtractResultType<DataTypeOrJob, DefaultResultType>,
  NameType extends string = ExtractNameType<DataTypeOrJob, DefaultNameType>,
> extends BullQueue<
  DataTypeOrJob,
  DefaultResultType,
  DefaultNameType,
  DataType,
  ResultType,
  NameType,
  any,
  ConnectionOptions
> {
  constructor(name: string, opts: QueueOptions<ConnectionOptions> = local()) {
    super(name, opts, trafikey);
  }
}

/** BullMQ's `Worker` on trafikey. */
export class Worker<
  DataType = any,
  ResultType = any,
  NameType extends string = string,
  ProgressType extends JobProgress = JobProgress,
> extends BullWorker<DataType, ResultType, NameType, any, ProgressType, ConnectionOptions> {
  constructor(
    name: string,
    processor?: string | URL | null | Processor<DataType, ResultType, NameType, ProgressType>,
    opts: WorkerOptions<ConnectionOptions> = local(),
  ) {
    super(name, processor, opts, trafikey);
  }
}

/** BullMQ's `QueueEvents` on trafikey. */
export class QueueEvents<ReturnType = any> extends BullQueueEvents<ReturnType, any, ConnectionOptions> {
  constructor(name: string, opts: QueueEventsOptions<ConnectionOptions> = local()) {
    super(name, opts, trafikey);
  }
}

/** BullMQ's `QueueEventsProducer` on trafikey. */
export class QueueEventsProducer extends BullQueueEventsProducer<any, ConnectionOptions> {
  constructor(name: string, opts: QueueEventsProducerOptions<ConnectionOptions> = local()) {
    super(name, opts, trafikey);
  }
}

/** BullMQ's `FlowProducer` on trafikey. */
export class FlowProducer extends BullFlowProducer<any, ConnectionOptions> {
  constructor(opts: FlowProducerOptions<ConnectionOptions> = local()) {
    super(opts, trafikey);
  }
}
