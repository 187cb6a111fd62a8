// bull-board (BullMQ's dashboard) on trafikey, in a real browser: examples/bull-board.mjs serves
// two queues with jobs in every state, and Debian's headless chromium, driven by playwright-core
// (never a browser a tool downloads), must show the queues, their counts and a job's detail.
// Its actions (promote, retry, remove, pause, resume, empty, editing a job's data) must act on
// the queues, and what trafikey cannot serve (flows) must answer the board with a message
// naming the missing feature. Screenshots go to $BULL_BOARD_SHOTS (default: the
// repository's target/). Nothing here asserts a time: every wait is for a state or a text.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { withBackend, type Job, type Queue } from 'bullmq';
import { withTrafikey } from '../src/index.js';
import { until } from './helpers.js';
// @ts-expect-error the example is plain JavaScript, without declarations
import { serveBoard, seedDemo } from '../examples/bull-board.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.BULL_BOARD_SHOTS ?? resolve(__dirname, '../../../target');
// Flags for a headless run that touches no network of its own and keeps no state between runs
// (the profile is a fresh directory, removed afterwards).
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const connection = { host: '127.0.0.1', port: inject('port') };

let demo: { queues: Queue[]; worker: { close(): Promise<void> }; completed: Job; release: () => void };
let board: { url: string; close(): Promise<void> };
let profile: string;
let browser: BrowserContext;
let page: Page;
let failed: Job;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no browser at ${CHROMIUM}: run scripts/setup test (Debian's chromium), or set CHROMIUM`);
  }
  demo = await seedDemo(withTrafikey(withBackend), connection);
  [failed] = await demo.queues[0].getJobs(['failed']);
  board = await serveBoard(demo.queues);
  profile = mkdtempSync(join(tmpdir(), 'trafikey-chromium-'));
  // A persistent context is how playwright takes a profile directory of ours.
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: FLAGS,
    headless: true,
    viewport: { width: 1400, height: 900 },
  });
  page = browser.pages()[0] ?? (await browser.newPage());
  mkdirSync(SHOTS, { recursive: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  if (profile) {
    rmSync(profile, { recursive: true, force: true });
  }
  demo?.release();
  await demo?.worker.close();
  await board?.close();
  for (const q of demo?.queues ?? []) {
    await q.obliterate({ force: true });
    await q.close();
  }
}, 60_000);

async function text(): Promise<string> {
  return page.innerText('body');
}

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(new URL(path, board.url), {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // 204 (a job removed) has no body.
  const raw = await res.text();
  return { status: res.status, body: raw ? JSON.parse(raw) : undefined };
}

describe('bull-board on trafikey', () => {
  it('lists both queues with the counts of every state', async () => {
    const { status, body } = await api('GET', 'api/queues');
    expect(status).toBe(200);
    const byName = Object.fromEntries(body.queues.map((q: { name: string }) => [q.name, q]));
    expect(byName.mail.counts).toMatchObject({
      active: 1,
      waiting: 2,
      prioritized: 1,
      delayed: 1,
      completed: 1,
      failed: 1,
    });
    expect(byName.mail.isPaused).toBe(false);
    expect(byName.reports.counts).toMatchObject({ waiting: 2, active: 0, completed: 0 });
    expect(byName.reports.isPaused).toBe(true);
  });

  it('shows the queues and their counts on the overview', async () => {
    await page.goto(board.url);
    await page.getByText('7 Jobs').waitFor();
    const body = await text();
    expect(body).toMatch(/^mail$/m);
    expect(body).toMatch(/reports\s*\[ Paused \]/);
    expect(body).toContain('2 Jobs');
    // The status tabs add both queues up: 2 + 2 waiting (the paused queue's jobs wait too).
    for (const [state, n] of [
      ['ACTIVE', 1],
      ['WAITING', 4],
      ['PRIORITIZED', 1],
      ['COMPLETED', 1],
      ['FAILED', 1],
      ['DELAYED', 1],
    ]) {
      expect(body, state as string).toMatch(new RegExp(`^${state}\\s+${n}$`, 'm'));
    }
    await page.screenshot({ path: join(SHOTS, 'bull-board.png') });
  });

  it("lists a queue's jobs in every state", async () => {
    await page.goto(new URL('queue/mail', board.url).href);
    // active (with its progress), waiting, prioritized, completed, failed, delayed; each card
    // renders on its own: wait for each text rather than read the page once.
    for (const seen of [
      'digest',
      '40%',
      'dave@example.org',
      'priority 3',
      'ada@example.org',
      'cannot deliver to bob@invalid',
      'grace@example.org',
    ]) {
      await page.getByText(seen).first().waitFor();
    }
    const body = await text();
    for (const [state, n] of [
      ['ACTIVE', 1],
      ['WAITING', 2],
      ['PRIORITIZED', 1],
      ['COMPLETED', 1],
      ['FAILED', 1],
      ['DELAYED', 1],
    ]) {
      expect(body, state as string).toMatch(new RegExp(`^${state}\\s+${n}$`, 'm'));
    }
    await page.screenshot({ path: join(SHOTS, 'bull-board-mail.png'), fullPage: true });
  });

  it("shows a job's detail", async () => {
    const id = demo.completed.id!;
    await page.goto(new URL(`queue/mail/${id}`, board.url).href);
    await page.getByText(id).waitFor();
    const body = await text();
    expect(body).toContain('welcome');
    expect(body).toMatch(/to:\s*"ada@example.org"/);
    expect(body).toMatch(/delivered:\s*"ada@example.org"/);
    expect(body).toContain('Finished at');
    // The worker that ran it, by the name it gave (the claim's BY).
    expect(body).toContain('by mailer-1');
    await page.screenshot({ path: join(SHOTS, 'bull-board-job.png') });
  });

  it("edits a job's data in the UI", async () => {
    await page.goto(new URL(`queue/mail/${failed.id}`, board.url).href);
    await page.getByText('cannot deliver to bob@invalid').first().waitFor();
    const edit = page.locator('button:has(svg.lucide-pencil)');
    await edit.hover();
    await page.getByText('Update Data', { exact: true }).waitFor();
    await edit.click();
    await page.getByText('Update job data').first().waitFor();
    // The dialog's editor holds the job's data: replaced by typing, as a person edits it.
    const editor = page.locator('[role="dialog"] [contenteditable="true"], [role="dialog"] textarea').first();
    await editor.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText('{"to": "bob@example.org"}');
    await page.getByRole('button', { name: 'Update', exact: true }).click();
    await until(
      async () => JSON.stringify((await demo.queues[0].getJob(failed.id!))!.data) === '{"to":"bob@example.org"}',
    );
    await page.screenshot({ path: join(SHOTS, 'bull-board-update-data.png') });
  });

  it('answers what trafikey cannot serve through the API with the missing feature', async () => {
    const id = failed.id!;
    // A job's data is replaced (TRA.SETDATA), in any state.
    const data = await api('PATCH', `api/queues/mail/${id}/update-data`, { jobData: { to: 'x@example.org' } });
    expect(data.status).toBeLessThan(300);
    expect((await demo.queues[0].getJob(id))!.data).toEqual({ to: 'x@example.org' });
    // Priority is a scheduling fact (TRA.PRIORITY): the board may change it.
    const prio = await api('PATCH', `api/queues/mail/${id}/priority`, { priority: 2 });
    expect(prio.status).toBeLessThan(300);
    expect((await demo.queues[0].getJob(id))!.priority).toBe(2);
    const child = await api('POST', 'api/queues/mail/add', {
      name: 'child',
      data: {},
      options: { parent: { id, queue: 'bull:mail' } },
    });
    expect(child.status).toBe(500);
    expect(child.body.message).toMatch(/flows \(a parent job\) is not supported/);
    // A job outside any flow still opens in the flow view: no flow, no error.
    const flow = await api('GET', `api/queues/mail/${id}/flow`);
    expect(flow.status).toBe(200);
    expect(flow.body.isFlowNode).toBe(false);
    // The demo's worker has metrics: the server counted its one completed and one failed job.
    const metrics = await api('GET', 'api/queues/mail/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body.completed.meta.count).toBe(1);
    expect(metrics.body.failed.meta.count).toBe(1);
    const mail = (await api('GET', 'api/queues')).body.queues.find((q: { name: string }) => q.name === 'mail');
    expect(mail.counts).toMatchObject({ waiting: 2, prioritized: 1 });
  });

  // Last: it changes the demo's jobs. The worker's one slot stays on the held digest, so what
  // the actions make ready stays where they put it.
  it("acts on trafikey's queues: promote, retry, remove, resume and pause, empty", async () => {
    const [mail, reports] = demo.queues;
    const queue = async (name: string) =>
      (await api('GET', 'api/queues')).body.queues.find((q: { name: string }) => q.name === name);
    const state = async (id: string) => (await mail.getJob(id))?.getState();
    const ok = (r: { status: number }) => expect(r.status).toBeLessThan(300);

    const [delayed] = await mail.getJobs(['delayed']);
    ok(await api('PUT', `api/queues/mail/${delayed.id}/promote`));
    expect(await state(delayed.id!)).toBe('waiting');
    // The failed job (priority 2 since the test above) is retried into the prioritized set.
    ok(await api('PUT', `api/queues/mail/${failed.id}/retry`));
    expect(await state(failed.id!)).toBe('prioritized');
    ok(await api('PUT', `api/queues/mail/${demo.completed.id}/clean`));
    expect(await mail.getJob(demo.completed.id!)).toBeUndefined();
    expect((await queue('mail')).counts).toMatchObject({
      active: 1,
      waiting: 3,
      prioritized: 2,
      delayed: 0,
      completed: 0,
      failed: 0,
    });

    ok(await api('PUT', 'api/queues/reports/resume'));
    expect(await reports.isPaused()).toBe(false);
    ok(await api('PUT', 'api/queues/reports/pause'));
    expect((await queue('reports')).isPaused).toBe(true);
    ok(await api('PUT', 'api/queues/reports/empty'));
    expect((await queue('reports')).counts).toMatchObject({ waiting: 0, active: 0, delayed: 0 });
  });
});
