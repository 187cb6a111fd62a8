// Vitest runner for BullMQ's suite: skips the tests the skip list names and records every
// test's outcome (state and retries) as one JSON line, for scripts/bullmq-suite's report.
import { appendFileSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { VitestTestRunner } from 'vitest/runners';

type Task = {
  type: string;
  name: string;
  mode: string;
  suite?: Task;
  file?: { filepath: string };
  tasks?: Task[];
  result?: { state?: string; retryCount?: number; errors?: { message?: string }[] };
};

const skipFile = process.env.TRAFIKEY_SKIP;
const outFile = process.env.TRAFIKEY_RESULTS;
const skips = new Map<string, string>();
if (skipFile) {
  for (const line of readFileSync(skipFile, 'utf8').split('\n')) {
    const t = line.trim();
    if (!t || t.startsWith('#')) {
      continue;
    }
    const parts = t.split(' | ');
    if (parts.length === 3) {
      skips.set(`${parts[0]} | ${parts[1]}`, parts[2]);
    }
  }
}

function fullName(t: Task): string {
  const names: string[] = [];
  // A file is a suite with a filepath: the name stops below it.
  for (let s: Task | undefined = t; s && !(s as { filepath?: string }).filepath; s = s.suite) {
    names.unshift(s.name);
  }
  return names.join(' > ');
}

function record(r: Record<string, unknown>): void {
  if (outFile) {
    appendFileSync(outFile, JSON.stringify(r) + '\n');
  }
}

function fileOf(t: Task): string {
  return basename(t.file?.filepath ?? '');
}

export default class TrafikeyRunner extends VitestTestRunner {
  onCollected(files: Task[]): unknown {
    const walk = (t: Task) => {
      if (t.type === 'test') {
        const reason = skips.get(`${fileOf(t)} | ${fullName(t)}`);
        if (reason && (t.mode === 'run' || t.mode === 'queued')) {
          t.mode = 'skip';
          record({ file: fileOf(t), name: fullName(t), state: 'skip', retries: 0, skip: reason });
        }
      }
      t.tasks?.forEach(walk);
    };
    files.forEach(walk);
    return super.onCollected?.(files);
  }

  onAfterRunTask(t: Task): void {
    super.onAfterRunTask(t);
    if (t.type === 'test' && t.mode !== 'skip' && t.mode !== 'todo') {
      record({
        file: fileOf(t),
        name: fullName(t),
        state: t.result?.state ?? t.mode,
        retries: t.result?.retryCount ?? 0,
        skip: null,
        error: t.result?.state === 'fail' ? String(t.result?.errors?.[0]?.message ?? '').slice(0, 300) : undefined,
      });
    }
  }
}
