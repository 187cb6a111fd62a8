// Reading the server's answers: field/value pairs, numbers, error codes, a pipeline's replies.
import type { ChainableCommander } from 'ioredis';

/** A reply's fields by name (a row, a scheduler, the limits). */
export type Fields = Record<string, unknown>;

/** A reply's field/value pairs (a flat array, or RESP3's map) added to `out`. */
export function pairs(reply: unknown, out: Fields = {}): Fields {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) {
      out[String(reply[i])] = reply[i + 1];
    }
  } else if (reply && typeof reply === 'object') {
    Object.assign(out, reply);
  }
  return out;
}

/**
 * A reply's pairs to read, not to change: an object as it is (a row a claim brought is read
 * several times a job), an array copied into one.
 */
export function view(reply: unknown): Fields {
  return reply && typeof reply === 'object' && !Array.isArray(reply) ? (reply as Fields) : pairs(reply);
}

export function num(v: unknown): number | undefined {
  if (v === null || v === undefined) {
    return undefined;
  }
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/** The code a module error starts with (`EMQSTATE`, `EMQNOJOB`, `EMQLEASE`, …). */
export function errCode(err: unknown): string {
  const msg = (err as Error | null | undefined)?.message ?? '';
  return msg.split(' ', 1)[0];
}

/** A job that moved between reading its id and acting on it: a race a batch action passes over. */
export const moved = (err: unknown) => errCode(err) === 'EMQSTATE' || errCode(err) === 'EMQNOJOB';

/** The job is not held by this token (any more): its lease lapsed, or it moved or is gone. */
export const notHeld = (err: unknown) => errCode(err) === 'EMQLEASE' || moved(err);

/**
 * A pipeline's (or transaction's) replies, in order. A command's error is thrown unless
 * `expected` accepts it (its reply is then `undefined`): a refused command (NOPERM, WRONGTYPE)
 * must not read as an empty answer, nor a refused write pass as done.
 */
export async function replies(
  p: ChainableCommander,
  expected: (err: Error) => boolean = () => false,
): Promise<unknown[]> {
  const res = (await p.exec()) ?? [];
  return res.map(([err, reply]) => {
    if (err && !expected(err)) {
      throw err;
    }
    return err ? undefined : reply;
  });
}

/** `value` as JSON: as it is when it parses, else as a JSON string; `fallback` when absent. */
export function jsonOr(value: string | null | undefined, fallback: string): string {
  if (value === null || value === undefined) {
    return fallback;
  }
  try {
    JSON.parse(value);
    return value;
  } catch {
    return JSON.stringify(value);
  }
}
