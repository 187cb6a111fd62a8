// The module's events as BullMQ's QueueEvents reads them: `id` becomes `jobId` (a custom id
// where an alias names it), facts take BullMQ's names, and the payloads events do not carry (a
// result, a progress report) are filled in from the row.
import { jsonOr } from './reply.js';

/** One stream entry: its id and its fields by name. */
export type Entry = readonly [string, Record<string, string>];

/** A payload an event leaves to the row: `r` a completed job's result, `g` its progress. */
export interface Need {
  kind: 'r' | 'g';
  id: string;
}

/** A stream read's entries, parsed: the jobs they name, and the payloads to read from rows. */
export function parseEntries(entries: [string, string[]][]): { parsed: Entry[]; ids: Set<string>; needs: Need[] } {
  const needs: Need[] = [];
  const ids = new Set<string>();
  const parsed = entries.map(([eid, f]): Entry => {
    const o: Record<string, string> = {};
    for (let i = 0; i + 1 < f.length; i += 2) {
      o[f[i]] = f[i + 1];
    }
    if (o.id !== undefined) {
      ids.add(o.id);
      if (o.event === 'completed' && o.result === undefined) {
        needs.push({ kind: 'r', id: o.id });
      } else if (o.event === 'progress' && o.progress === undefined) {
        needs.push({ kind: 'g', id: o.id });
      }
    }
    return [eid, o];
  });
  return { parsed, ids, needs };
}

/**
 * The aliases events name as they go (`added` and `delayed` carry the job's custom id): module
 * id → custom id. A refused producer's `deduplicated` names the holder and the refused job's
 * alias, no pair.
 */
export function namedAliases(parsed: Entry[]): [string, string][] {
  const out: [string, string][] = [];
  for (const [, o] of parsed) {
    if (o.id !== undefined && o.alias !== undefined && o.refused === undefined && o.kept === undefined) {
      out.push([o.id, o.alias]);
    }
  }
  return out;
}

/**
 * The entries in BullMQ's vocabulary. `rev` gives the id BullMQ knows each job by, `payload`
 * the results and progress read from rows (`r:<id>`, `g:<id>`).
 */
export function translate(
  parsed: Entry[],
  rev: Map<string, string>,
  payload: Map<string, string | null>,
): [string, string[]][] {
  const out: [string, string[]][] = [];
  for (const [eid, o] of parsed) {
    if (o.id === undefined) {
      out.push([eid, Object.entries(o).flat()]);
      continue;
    }
    const jobId = rev.get(o.id) ?? o.id;
    const f: string[] = ['event', o.event, 'jobId', jobId];
    switch (o.event) {
      case 'added':
        f.push('name', o.name ?? '');
        out.push([eid, f]);
        out.push([eid, ['event', 'waiting', 'jobId', jobId]]);
        continue;
      case 'delayed':
        // A new job's (it carries its name): BullMQ tells its adding first.
        if (o.name !== undefined) {
          out.push([eid, ['event', 'added', 'jobId', jobId, 'name', o.name]]);
        }
        f.push('delay', o.due ?? '0');
        break;
      case 'waiting':
      case 'removed':
        // BullMQ names the states a job leaves as its own keys are named: `wait`, `prioritized`.
        if (o.prev) {
          f.push('prev', o.prev === 'prio' ? 'prioritized' : o.prev);
        }
        break;
      case 'active':
        f.push('prev', 'waiting');
        break;
      case 'completed':
        f.push('returnvalue', jsonOr(o.result ?? payload.get(`r:${o.id}`), 'null'), 'prev', 'active');
        break;
      case 'failed':
        f.push('failedReason', o.error ?? '', 'prev', 'active');
        break;
      case 'progress':
        f.push('data', jsonOr(o.progress ?? payload.get(`g:${o.id}`), '0'));
        break;
      case 'deduplicated':
        // BullMQ's: the job holding the id, the id, and the job that was not added (or, with
        // REPLACE, the delayed job replaced). A job never added (or kept, KEEPLAST, until the
        // holder finishes) is known by its custom id, which the event carries as `alias`.
        f.push('deduplicationId', o.dedup ?? '');
        if (o.refused !== undefined || o.kept !== undefined) {
          f.push('deduplicatedJobId', o.alias ?? o.refused ?? o.kept ?? '');
        } else {
          f.push('deduplicatedJobId', rev.get(o.replaced ?? '') ?? o.replaced ?? '');
        }
        break;
      default:
        for (const [k, v] of Object.entries(o)) {
          if (k !== 'event' && k !== 'id') {
            f.push(k, v);
          }
        }
    }
    out.push([eid, f]);
  }
  return out;
}
