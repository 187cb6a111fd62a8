// What every package test file needs: waiting for a condition, and closing what a test opened.

export const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/** Polls `check` every 20 ms until it holds; throws after `ms`. */
export async function until(check: () => Promise<boolean> | boolean, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) {
      throw new Error('condition not met in time');
    }
    await sleep(20);
  }
}

const closers: { close(): Promise<void> }[] = [];

/** Keeps `x` to be closed after the test (`closeTracked`), newest first. */
export function track<T extends { close(): Promise<void> }>(x: T): T {
  closers.push(x);
  return x;
}

export async function closeTracked(): Promise<void> {
  for (const c of closers.splice(0).reverse()) {
    await c.close().catch(() => undefined);
  }
}
