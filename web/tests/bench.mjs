/* global window, document, performance, requestAnimationFrame, queueMicrotask, MouseEvent, PerformanceObserver */
// The web UI's performance in a real browser (issue 15; results in docs/benchmarks.md, "Web UI
// (issue 15)"):
//
//   npm run build && npm run bench -- [--children 1000] [--rate 50] [--seconds 20] [--soak-minutes 10] [--json FILE]
//
// The built app (web/dist, served by a static loopback server as `trellis serve` serves it)
// in headless Chromium ($CHROMIUM, default /usr/bin/chromium), with the API and the event
// socket faked by Playwright, so the browser side is all that is measured:
//
//  1. initial load: the JavaScript the runs page loads, raw and as sent (lazy chunks apart);
//  2. a run with one fan-out stage of --children agents: time to the first painted graph, and
//     clicks (open the fan-out group's panel of children, pick a child: its node panel, the
//     group again) from the click to the frame painted after the panel appeared;
//  3. --seconds of node transitions at --rate events/s: from each event's arrival on the
//     WebSocket to the frame painted after the graph showed it (p50/p95/max), long tasks, and
//     the same clicks while the events stream;
//  4. --soak-minutes more of the stream (children retried again and again): the JS heap after
//     a forced GC and the DOM size every 30 s; then 10 s of events measured again as in 3.
import { chromium } from 'playwright-core';
import http from 'node:http';
import { readFileSync, writeFileSync, existsSync, statSync } from 'node:fs';
import { gzipSync, constants } from 'node:zlib';
import { cpus, totalmem, release } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const opt = (n, d) => (args.includes(n) ? args[args.indexOf(n) + 1] : d);
const N = Number(opt('--children', '1000'));
const RATE = Number(opt('--rate', '50'));
const SECONDS = Number(opt('--seconds', '20'));
const SOAK_MIN = Number(opt('--soak-minutes', '10'));
const JSON_OUT = opt('--json', null);
const RUN = 'f'.repeat(32);
const PARENT = 'review';
const dist = join(dirname(fileURLToPath(import.meta.url)), '../dist');
if (!existsSync(join(dist, 'index.html'))) {
  console.error('no web/dist: run `npm run build` first');
  process.exit(1);
}
// Round 1 of the stream (each child READY → RUNNING → COMPLETED) gives every event a distinct
// group label, which is what the latency probe waits for.
if (RATE * SECONDS > 2 * N) {
  console.error(`--rate × --seconds must be at most 2 × --children (${2 * N}) events`);
  process.exit(1);
}

// ---- the built app, served like trellis serve does: the build's .br/.gz copy when accepted ----
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml' };
const server = http.createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  const file = normalize(join(dist, path === '/' ? 'index.html' : path));
  if (!file.startsWith(dist) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  const accept = String(req.headers['accept-encoding'] ?? '');
  const headers = { 'content-type': types[extname(file)] ?? 'application/octet-stream' };
  let body = file;
  for (const [coding, ext] of [['br', '.br'], ['gzip', '.gz']]) {
    if (accept.includes(coding) && existsSync(file + ext)) {
      headers['content-encoding'] = coding;
      body = file + ext;
      break;
    }
  }
  res.writeHead(200, headers);
  res.end(readFileSync(body));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}`;

// ---- the faked API ----
const nodes = [
  { id: 'upfront_retrieval', attempt: 1, state: 'COMPLETED', parent: null, error: null, interrupt: null },
  { id: PARENT, attempt: 1, state: 'RUNNING', parent: null, error: null, interrupt: null },
  { id: `${PARENT}:collect`, attempt: 0, state: null, parent: null, error: null, interrupt: null },
  { id: 'DONE', attempt: 0, state: null, parent: null, error: null, interrupt: null },
  { id: 'ABORT', attempt: 0, state: null, parent: null, error: null, interrupt: null },
];
for (let i = 0; i < N; i++) nodes.push({ id: `${PARENT}/agent_${i}`, attempt: 1, state: 'READY', parent: PARENT, error: null, interrupt: null });
const graph = {
  run: RUN, status: 'running', steps: 2, lastSeq: 10, counters: {}, nodes, groups: [], waiting: [], workflow: 'fanout', entry: PARENT,
  routing: [{ stage: PARENT, next_on_success: 'DONE', next_on_failure: 'ABORT', max_attempts: 2 }], skipped: [],
};
const zero = { calls: 0, promptTokens: 0, completionTokens: 0, cachedTokens: 0, costUsd: null };
const usage = { run: zero, agents: [], stages: [] };
const record = {
  id: RUN, graph: 'fanout', status: 'running', step: 2, lastSeq: 10, createdTs: Date.now(), updatedTs: Date.now(), terminal: null, error: null,
  workspace: 'w', live: true, usage, workflow: 'fanout', request: `fan out to ${N} agents`,
};

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--enable-precise-memory-info'] });
const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await ctx.newPage();
const json = (body) => ({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });
await page.route('**/api/**', (route) => {
  const p = decodeURIComponent(new URL(route.request().url()).pathname);
  if (p === '/api/workspaces') return route.fulfill(json([{ id: 'w', root: '/tmp/w' }]));
  if (p === '/api/workflows') return route.fulfill(json([record]));
  if (p === `/api/workflows/${RUN}/graph`) return route.fulfill(json(graph));
  if (p === `/api/workflows/${RUN}`) return route.fulfill(json(record));
  if (p === `/api/workflows/${RUN}/usage`) return route.fulfill(json(usage));
  if (p.startsWith('/api/streams/') || p === '/api/channels' || p === '/api/sessions') return route.fulfill(json([]));
  if (p === '/api/catalog/workflows') return route.fulfill(json({ workflows: [], errors: [] }));
  return route.fulfill({ status: 404, contentType: 'application/json', body: JSON.stringify({ error: 'not faked', kind: 'not_found' }) });
});
let send = null;
await page.routeWebSocket('**/api/events', (ws) => {
  ws.onMessage((m) => {
    const f = JSON.parse(String(m));
    if (f.type === 'subscribe') ws.send(JSON.stringify({ type: 'subscribed', stream: f.stream, since: f.since }));
  });
  send = (frame) => ws.send(JSON.stringify(frame));
});
// The probe: each event frame carrying `want` (the group's expected label) is timed from its
// arrival to the frame painted after the graph showed that label.
await page.addInitScript(() => {
  const w = window;
  w.__lat = [];
  w.__long = [];
  w.__bySeq = new Map();
  try {
    new PerformanceObserver((l) => l.getEntries().forEach((e) => w.__long.push(e.duration))).observe({ type: 'longtask', buffered: true });
  } catch {
    /* no long task API */
  }
  const Orig = w.WebSocket;
  w.WebSocket = class extends Orig {
    constructor(...a) {
      super(...a);
      this.addEventListener('message', (e) => {
        const f = JSON.parse(e.data);
        const want = f.type === 'event' && f.event.want;
        if (!want) return;
        const t0 = performance.now();
        // Labels are distinct while measured: the one shown says which event the graph is at
        // (events that arrive within one frame are painted together).
        const mine = f.seq;
        w.__bySeq.set(want, mine);
        const check = () => {
          const shown = w.__bySeq.get(document.querySelector('[data-testid="graph-group-review"]')?.getAttribute('aria-label'));
          if (shown !== undefined && shown >= mine) requestAnimationFrame(() => w.__lat.push(performance.now() - t0));
          else requestAnimationFrame(check);
        };
        queueMicrotask(check);
      });
    }
  };
});

const out = {
  date: new Date().toISOString(),
  machine: `${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${release()}`,
  browser: `Chromium ${browser.version()} (headless)`,
  node: process.version,
  command: `npm run bench -- --children ${N} --rate ${RATE} --seconds ${SECONDS} --soak-minutes ${SOAK_MIN}`,
};
const log = (...a) => console.error(...a);

// ---- 1. initial load ----
const scripts = new Map();
page.on('response', async (r) => {
  if (r.request().resourceType() === 'script' || r.url().endsWith('.js')) {
    try {
      const sent = (await r.request().sizes()).responseBodySize;
      scripts.set(new URL(r.url()).pathname, { body: await r.body(), sent, coding: r.headers()['content-encoding'] ?? 'identity' });
    } catch {
      /* gone */
    }
  }
});
await page.goto(`${url}/#/runs`);
await page.waitForSelector('[data-testid=run-row]');
await page.waitForLoadState('networkidle');
const initial = [...scripts.entries()];
out.initialJs = {
  files: initial.map(([p]) => p),
  rawKB: +(initial.reduce((n, [, s]) => n + s.body.length, 0) / 1024).toFixed(1),
  sentKB: +(initial.reduce((n, [, s]) => n + s.sent, 0) / 1024).toFixed(1),
  encodings: [...new Set(initial.map(([, s]) => s.coding))],
  gzipKB: +(initial.reduce((n, [, s]) => n + gzipSync(s.body, { level: constants.Z_BEST_COMPRESSION }).length, 0) / 1024).toFixed(1),
};
log('initial JS', out.initialJs);

// ---- 2. the 1,000-node fan-out: first paint and clicks ----
const ORDER = ['RUNNING', 'WAITING_INPUT', 'READY', 'FAILED', 'COMPLETED', 'PRUNED', 'SKIPPED', 'PENDING'];
const counts = { READY: N };
const label = () => `${N} fan-out children of ${PARENT}: ${ORDER.filter((s) => counts[s]).map((s) => `${counts[s]} ${s}`).join(', ')}`;
await page.goto('about:blank');
await page.goto(`${url}/#/runs/${RUN}/graph`);
await page.waitForSelector('[data-testid="graph-group-review"]', { timeout: 60_000 });
out.fanout = {
  children: N,
  firstGraphMs: +(await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))))).toFixed(0),
};
/** Click `sel` in the page, resolve with the ms until the frame painted after `want` exists. */
const click = (sel, want) =>
  page.evaluate(
    ({ sel, want }) =>
      new Promise((res, rej) => {
        const el = document.querySelector(sel);
        if (!el) return rej(new Error(`no ${sel}`));
        const t0 = performance.now();
        el.dispatchEvent(new MouseEvent('click', { bubbles: true }));
        const check = () => {
          if (document.querySelector(want)) requestAnimationFrame(() => res(performance.now() - t0));
          else if (performance.now() - t0 > 10_000) rej(new Error(`no ${want} 10 s after the click`));
          else requestAnimationFrame(check);
        };
        check();
      }),
    { sel, want },
  );
/** With the group's panel open: pick child k (its node panel), then the group again (its panel). */
async function clicks(k) {
  const child = `${PARENT}/agent_${k % 300}`; // the panel lists the first 300 until "show all"
  const pick = await click(`[data-testid="group-child-${child}"]`, `[data-testid="node-panel"][data-node="${child}"]`);
  const back = await click('[data-testid="graph-group-review"]', '[data-testid="group-panel"]');
  return [pick, back];
}
out.fanout.openGroupMs = +(await click('[data-testid="graph-group-review"]', '[data-testid="group-panel"]')).toFixed(1);
out.fanout.idleClicksMs = (await clicks(7)).map((x) => +x.toFixed(1));
log('fan-out', out.fanout);

// ---- 3. the stream ----
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? +s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(1) : null;
};
let seq = 10;
const attempt = new Array(N).fill(1);
const state = new Array(N).fill('READY');
function transition(k, to, measured) {
  const from = state[k];
  counts[from]--;
  counts[to] = (counts[to] ?? 0) + 1;
  state[k] = to;
  if (to === 'RUNNING' && from === 'COMPLETED') attempt[k]++;
  send?.({
    type: 'event', name: 'graph:node_status_changed', workspace: 'w', stream: `run:${RUN}`, seq: ++seq, ts: Date.now(),
    event: { type: 'nodeTransition', node: `${PARENT}/agent_${k}`, attempt: attempt[k], from, to, ...(measured ? { want: label() } : {}) },
  });
}
/** `total` events at RATE/s from `step(i)`; clicks every 2 s when `withClicks`. */
async function stream(total, step, withClicks) {
  const t0 = Date.now();
  const clickTimes = [];
  let nextClick = 2000;
  for (let i = 0; i < total; i++) {
    step(i);
    if (withClicks && Date.now() - t0 >= nextClick) {
      nextClick += 2000;
      clickTimes.push(...(await clicks((i * 7) % N)));
    }
    const due = t0 + ((i + 1) * 1000) / RATE;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  return { seconds: (Date.now() - t0) / 1000, clickTimes };
}
async function measured(name, total, step) {
  await page.evaluate(() => {
    window.__lat = [];
    window.__long = [];
  });
  const { seconds, clickTimes } = await stream(total, step, true);
  await page.waitForTimeout(500);
  const lat = await page.evaluate(() => window.__lat);
  const long = await page.evaluate(() => window.__long);
  const r = {
    events: total, seconds: +seconds.toFixed(1), measured: lat.length,
    p50Ms: pct(lat, 0.5), p95Ms: pct(lat, 0.95), maxMs: pct(lat, 1),
    longTasks: long.length, longestTaskMs: long.length ? +Math.max(...long).toFixed(0) : 0,
    clicksMs: { n: clickTimes.length, p50: pct(clickTimes, 0.5), max: pct(clickTimes, 1) },
  };
  log(name, r);
  return r;
}
// Round 1: child k runs at event 2k and completes at 2k+1.
const total1 = RATE * SECONDS;
out.stream = await measured('stream', total1, (i) => transition(Math.floor(i / 2), i % 2 === 0 ? 'RUNNING' : 'COMPLETED', true));
// Finish round 1 unmeasured, so every child has completed once.
for (let i = total1; i < 2 * N; i++) transition(Math.floor(i / 2), i % 2 === 0 ? 'RUNNING' : 'COMPLETED', false);

// ---- 4. the soak: children retried (COMPLETED → RUNNING → COMPLETED), heap and DOM every 30 s ----
const cdp = await ctx.newCDPSession(page);
await cdp.send('Performance.enable');
async function sample(t) {
  await cdp.send('HeapProfiler.collectGarbage');
  const { metrics } = await cdp.send('Performance.getMetrics');
  const m = Object.fromEntries(metrics.map((x) => [x.name, x.value]));
  return { minute: +(t / 60000).toFixed(1), heapMB: +(m.JSHeapUsedSize / 2 ** 20).toFixed(2), domNodes: m.Nodes, listeners: m.JSEventListeners };
}
const samples = [await sample(0)];
const soakStart = Date.now();
let j = 0;
while (Date.now() - soakStart < SOAK_MIN * 60_000) {
  const until = Math.min(soakStart + SOAK_MIN * 60_000, Date.now() + 30_000);
  const n = Math.max(1, Math.round(((until - Date.now()) / 1000) * RATE));
  await stream(n, () => {
    const k = Math.floor(j / 2) % N;
    transition(k, j % 2 === 0 ? 'RUNNING' : 'COMPLETED', false);
    j++;
  }, false);
  samples.push(await sample(Date.now() - soakStart));
  log('soak', samples.at(-1));
}
out.soak = { minutes: SOAK_MIN, events: j, samples };
// After the soak: 10 s more, measured (children fail one by one: distinct labels again).
let f = 0;
out.afterSoak = await measured('after the soak', Math.min(RATE * 10, N), () => transition(f++, 'FAILED', true));

await browser.close();
server.close();
console.log(JSON.stringify(out, null, 2));
if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify(out, null, 2) + '\n');
