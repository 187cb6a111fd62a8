// Sums up a suite run: node report.cjs <results.jsonl> <skip list> <file> [file ...]
// Prints per file passed / failed / passed on retry / skipped and the in-scope pass rate;
// exits 1 when a test outside the skip list failed every try.
const fs = require('node:fs');

const [resultsFile, skipFile, ...files] = process.argv.slice(2);
const rows = fs.existsSync(resultsFile)
  ? fs
      .readFileSync(resultsFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(l => JSON.parse(l))
  : [];
const per = new Map(files.map(f => [f, { passed: 0, failed: 0, retried: 0, skipped: 0 }]));
const failures = [];
const retried = [];
for (const r of rows) {
  if (!per.has(r.file)) per.set(r.file, { passed: 0, failed: 0, retried: 0, skipped: 0 });
  const p = per.get(r.file);
  if (r.skip) {
    p.skipped++;
  } else if (r.state === 'pass') {
    p.passed++;
    if (r.retries > 0) {
      p.retried++;
      retried.push(`${r.file} | ${r.name}`);
    }
  } else if (r.state === 'fail') {
    p.failed++;
    failures.push(`${r.file} | ${r.name}\n      ${(r.error || '').split('\n')[0]}`);
  }
}
const pad = (s, n) => String(s).padEnd(n);
// The file column fits the longest name.
const w = Math.max(30, ...[...per.keys()].map(f => f.length + 2));
const rate = (p, f) => (p + f === 0 ? '-' : ((100 * p) / (p + f)).toFixed(1) + '%');
console.log(
  `\n${pad('file', w)}${pad('passed', 8)}${pad('failed', 8)}${pad('retry', 8)}${pad('skipped', 9)}in-scope pass rate`,
);
const tot = { passed: 0, failed: 0, retried: 0, skipped: 0 };
for (const [f, p] of per) {
  console.log(
    `${pad(f, w)}${pad(p.passed, 8)}${pad(p.failed, 8)}${pad(p.retried, 8)}${pad(p.skipped, 9)}${rate(p.passed, p.failed)}`,
  );
  for (const k of Object.keys(tot)) tot[k] += p[k];
}
console.log(
  `${pad('total', w)}${pad(tot.passed, 8)}${pad(tot.failed, 8)}${pad(tot.retried, 8)}${pad(tot.skipped, 9)}${rate(tot.passed, tot.failed)}`,
);

if (skipFile && fs.existsSync(skipFile)) {
  const reasons = new Map();
  let n = 0;
  for (const line of fs.readFileSync(skipFile, 'utf8').split('\n')) {
    const parts = line.trim().split(' | ');
    if (line.trim().startsWith('#') || parts.length !== 3) continue;
    n++;
    reasons.set(parts[2], (reasons.get(parts[2]) || 0) + 1);
  }
  console.log(`\nskip list: ${n} tests — ` + [...reasons].map(([r, c]) => `${r} ${c}`).join(', '));
}
// A file with no result at all did not run (it failed to load, or vitest stopped early).
for (const [f, p] of per) {
  if (p.passed + p.failed + p.skipped === 0) {
    failures.push(`${f} | (no test ran)`);
  }
}
if (retried.length) console.log(`\npassed only on a retry:\n  ${retried.join('\n  ')}`);
if (failures.length) {
  console.log(`\nfailed every try (outside the skip list):\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
