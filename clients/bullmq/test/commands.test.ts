// The command builder (src/commands.ts) against the loaded module's own declarations: every
// command the builder knows is one the module registers, with the same keys by role in the
// same order (COMMAND DOCS names each key argument by its role), the same key positions
// (COMMAND INFO's key specs), and a built call whose keys the server finds exactly
// (COMMAND GETKEYS). And the other way: no source file sends a module command but through the
// builder. And the version the package requires at connect.
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { COMMANDS, Commands, type Name, type Names, type Spec } from '../src/commands.js';
import { MODULE_VERSION, checkVersion } from '../src/queue-base.js';

const port = inject('port');
const src = resolve(__dirname, '../src');

/** A flat reply of pairs as an object (RESP2's maps). */
function fields(flat: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const a = flat as unknown[];
  for (let i = 0; i + 1 < a.length; i += 2) {
    out[String(a[i])] = a[i + 1];
  }
  return out;
}

/** A key argument of COMMAND DOCS. */
interface DocArg {
  name: string;
  type: string;
  key_spec_index?: number;
  flags?: string[];
}

const names = Object.keys(COMMANDS) as Name[];
/** A name for each thing a key names, and two rows for a tail. */
const named: Record<string, string> = {
  job: 'JOB0000000000a',
  log: 'JOB0000000000a',
  dedup: 'd1',
  sched: 's1',
  set: 'completed',
};
const sample = { ...named, rows: ['JOB0000000000b', 'JOB0000000000c'] };
const cmd = new Commands('emq:{bull:q}');

describe('the command builder against the loaded module', () => {
  let c: Redis;
  beforeAll(() => {
    c = new Redis({ host: '127.0.0.1', port });
  });
  afterAll(() => {
    c.disconnect();
  });

  it('knows only commands the module registers', async () => {
    const registered = ((await c.call('COMMAND', 'LIST', 'FILTERBY', 'MODULE', 'trafikey')) as string[]).map(n =>
      n.toUpperCase(),
    );
    expect(names.filter(n => !registered.includes(n))).toEqual([]);
  });

  for (const name of names) {
    it(`${name}: its keys by role and position, as the module declares them`, async () => {
      const spec: Spec = COMMANDS[name];
      const [, docs] = (await c.call('COMMAND', 'DOCS', name)) as [string, unknown[]];
      const args = ((fields(docs).arguments as unknown[] | undefined) ?? []).map(a => fields(a) as unknown as DocArg);
      const keyArgs = args.filter(a => a.type === 'key');
      const built = cmd.build(name, sample as unknown as Names<typeof name>);
      if (spec.keys === null) {
        expect(keyArgs).toEqual([]);
        expect(args[0]?.name).not.toBe('numkeys');
        expect(built).toEqual([name]);
        return;
      }
      // COMMAND DOCS: numkeys, then each declared key named by its role, then the tail's count
      // and its keys.
      expect(args[0]).toMatchObject({ name: 'numkeys', type: 'integer' });
      const declared = args.slice(1, 1 + spec.keys.length);
      expect(declared.map(a => [a.name, a.type, a.key_spec_index])).toEqual(spec.keys.map((r, i) => [r, 'key', i]));
      const tail = keyArgs.filter(a => a.flags?.includes('multiple'));
      expect(tail.map(a => a.name)).toEqual(spec.tail === undefined ? [] : [spec.tail]);
      if (spec.tail !== undefined) {
        expect(args[1 + spec.keys.length]).toMatchObject({ name: 'n', type: 'integer' });
        expect(args[2 + spec.keys.length]).toMatchObject({
          name: spec.tail,
          type: 'key',
          key_spec_index: spec.keys.length,
        });
      }
      // COMMAND INFO: key spec i begins at argv 2 + i; a tail's reads its count at argv 2 + k.
      const [info] = (await c.call('COMMAND', 'INFO', name)) as unknown[][];
      const specs = (info[8] as unknown[]).map(s => fields(s));
      const begins = specs
        .map(s => fields(s.begin_search))
        .filter(b => b.type === 'index')
        .map(b => fields(b.spec).index);
      const k = spec.keys.length;
      expect(begins).toEqual([...spec.keys.map((_, i) => 2 + i), ...(spec.tail === undefined ? [] : [2 + k])]);
      // The built call: numkeys, then the keys of each role, which the server finds in it.
      expect(built[1]).toBe(k);
      const roleKeys = spec.keys.map(r => (r in named ? cmd.named(r as 'job', named[r]) : `emq:{bull:q}:${r}`));
      expect(built.slice(2, 2 + k)).toEqual(roleKeys);
      const rows = spec.tail === undefined ? [] : sample.rows.map(id => cmd.named('job', id));
      if (spec.tail !== undefined) {
        expect(built[2 + k]).toBe(rows.length);
      }
      const found = (await c.call('COMMAND', 'GETKEYS', ...built, 'x')) as string[];
      expect(found).toEqual([...roleKeys, ...rows]);
    });
  }
});

describe('every module call goes through the builder', () => {
  const files = readdirSync(src).filter(f => f.endsWith('.ts') && f !== 'commands.ts');
  /** A source file without its comments (which may name commands in backticks). */
  const text = (f: string) =>
    readFileSync(join(src, f), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, m => m.replace(/[^\n]/g, ' '))
      .replace(/(^|\s)\/\/.*$/gm, '$1');

  it('names a module command only as the first argument of build() or send()', () => {
    const strays: string[] = [];
    for (const f of files) {
      const t = text(f);
      for (const m of t.matchAll(/['"`](EMQ|TRA)\.[A-Z]+['"`]/g)) {
        const before = t.slice(0, m.index);
        if (!/(?:\bbuild|\bsend)\(\s*$/.test(before)) {
          strays.push(`${f}: ${m[0]}`);
        }
      }
    }
    expect(strays).toEqual([]);
  });

  it('sends nothing else by call(): each call(...) spreads a built call', () => {
    const strays: string[] = [];
    for (const f of files) {
      const t = text(f);
      for (const m of t.matchAll(/\.call\((?!\s*\.\.\.)|\bsendCommand\(/g)) {
        strays.push(`${f}:${t.slice(0, m.index).split('\n').length}: ${m[0]}`);
      }
    }
    expect(strays).toEqual([]);
  });
});

describe("the README's table of backend methods", () => {
  it("names every method of BullMQ's IQueueBackend", () => {
    const contract = readFileSync(
      resolve(__dirname, '../node_modules/bullmq/dist/esm/interfaces/queue-backend.d.ts'),
      'utf8',
    );
    const methods = new Set([...contract.matchAll(/^ {4}([a-zA-Z]+)[<(]/gm)].map(m => m[1]));
    for (const listener of ['on', 'once', 'removeListener']) {
      methods.delete(listener);
    }
    const readme = readFileSync(resolve(__dirname, '../README.md'), 'utf8');
    const table = readme.split('## Each backend method and the commands it sends')[1]?.split('\n## ')[0] ?? '';
    const listed = new Set(
      table
        .split('\n')
        .filter(l => l.startsWith('| `'))
        .flatMap(l => [...l.split(' | ')[0].matchAll(/`(\w+)`/g)].map(m => m[1])),
    );
    expect([...methods].filter(m => !listed.has(m))).toEqual([]);
    expect([...listed].filter(m => !methods.has(m))).toEqual([]);
  });
});

describe('the module version required at connect', () => {
  const reply = (version: string) => ['wire', 'echomq:6.0.0', 'module_version', version, 'module_major', 0];

  it("is Cargo.toml's version: package and module are released together", () => {
    const cargo = readFileSync(resolve(__dirname, '../../../Cargo.toml'), 'utf8');
    expect(/^version = "([^"]+)"/m.exec(cargo)?.[1]).toBe(MODULE_VERSION);
  });

  it('takes that version or a later one, and refuses an older one with one error', () => {
    expect(() => checkVersion(reply(MODULE_VERSION))).not.toThrow();
    expect(() => checkVersion(reply('0.3.10'))).not.toThrow();
    expect(() => checkVersion(reply('0.3.2'))).toThrow(
      `trafikey-bullmq: trafikey module ${MODULE_VERSION} or later required, server has 0.3.2`,
    );
    expect(() => checkVersion(reply('0.2.0'))).toThrow(/or later required, server has 0\.2\.0/);
  });

  it('is met by the loaded module', async () => {
    const c = new Redis({ host: '127.0.0.1', port });
    try {
      const reply = await c.call('EMQ.VERSION');
      expect(() => checkVersion(reply)).not.toThrow();
    } finally {
      c.disconnect();
    }
  });
});
