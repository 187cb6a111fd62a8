// Queue names, keys and job ids on the trafikey keyspace.

/** The module's keys are `emq:{Q}:<role>`; Q is 1..=128 bytes without `{`, `}` or a byte < 0x21. */
export const MAX_QUEUE_BYTES = 128;

/**
 * Escapes a BullMQ qualified name (`<prefix>:<queue>`) into a module queue name `Q`.
 * `%` is escaped too, so the mapping is injective: two different names never share a queue.
 */
export function escapeQueueName(name: string): string {
  const bytes = Buffer.from(name, 'utf8');
  let out = '';
  for (const b of bytes) {
    if (b < 0x21 || b === 0x25 || b === 0x7b || b === 0x7d || b === 0x7f) {
      out += '%' + b.toString(16).toUpperCase().padStart(2, '0');
    } else {
      out += String.fromCharCode(b);
    }
  }
  // Multi-byte UTF-8 was split into single bytes above: put the original bytes back.
  const q = Buffer.from(out, 'latin1').toString('utf8');
  if (Buffer.byteLength(q, 'utf8') > MAX_QUEUE_BYTES) {
    throw new Error(
      `trafikey: queue "${name}" is ${Buffer.byteLength(q)} bytes once escaped; the module takes at most ${MAX_QUEUE_BYTES}`,
    );
  }
  return q;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BRANDED = /^JOB[0-9A-Za-z]{11}$/;

/** A module job id: `JOB` + 11 Base62 characters. */
export function isBranded(id: string): boolean {
  return BRANDED.test(id);
}

export function base62(n: bigint): string {
  let s = '';
  while (n > 0n) {
    s = BASE62[Number(n % 62n)] + s;
    n /= 62n;
  }
  return s.padStart(11, '0');
}

let last = 0n;

/**
 * Mints a branded id from a snowflake: milliseconds in the high bits, a random start in the
 * low 22 so two processes minting in the same millisecond rarely meet, and strictly
 * increasing within a process so ids sort in mint order.
 */
export function mintJobId(now = Date.now()): string {
  const random = BigInt(Math.floor(Math.random() * (1 << 21)));
  let v = (BigInt(now) << 22n) | random;
  if (v <= last) {
    v = last + 1n;
  }
  last = v;
  return 'JOB' + base62(v);
}
