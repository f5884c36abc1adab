/* global window, document, performance, requestAnimationFrame, queueMicrotask */
// A synthetic 1,000-node fan-out run in a real browser, with the API and the event socket
// faked by Playwright (no trellis needed): measures from each WebSocket event's arrival to the
// next frame painted after the graph reflected it, while events stream at a given rate.
//
//   npm run build && npx vite preview --host 127.0.0.1 --port 4173 --strictPort &
//   CHROMIUM=$(command -v chromium) node tests/perf-fanout.mjs [--url http://127.0.0.1:4173] [--children 1000] [--rate 50] [--seconds 10]
//
// Needs `playwright-core` (not a dependency of the app: `npm i --no-save playwright-core`).
import { chromium } from 'playwright-core';

const args = process.argv.slice(2);
const opt = (n, d) => (args.includes(n) ? args[args.indexOf(n) + 1] : d);
const url = opt('--url', 'http://127.0.0.1:4173');
const N = Number(opt('--children', '1000'));
const RATE = Number(opt('--rate', '50'));
const SECONDS = Number(opt('--seconds', '10'));
const RUN = 'f'.repeat(32);

const nodes = [
  { id: 'upfront_retrieval', attempt: 1, state: 'COMPLETED', parent: null, error: null, interrupt: null },
  { id: 'review', attempt: 1, state: 'RUNNING', parent: null, error: null, interrupt: null },
  { id: 'review:collect', attempt: 0, state: null, parent: null, error: null, interrupt: null },
  { id: 'DONE', attempt: 0, state: null, parent: null, error: null, interrupt: null },
  { id: 'ABORT', attempt: 0, state: null, parent: null, error: null, interrupt: null },
];
for (let i = 0; i < N; i++) nodes.push({ id: `review/agent_${i}`, attempt: 1, state: 'READY', parent: 'review', error: null, interrupt: null });
const graph = {
  run: RUN, status: 'running', steps: 2, lastSeq: 10, counters: {}, nodes, groups: [], waiting: [],
  workflow: 'fanout', entry: 'review',
  routing: [{ stage: 'review', next_on_success: 'DONE', next_on_failure: 'ABORT', max_attempts: 2 }], skipped: [],
};
const usage = { run: { calls: 0, promptTokens: 0, completionTokens: 0, cachedTokens: 0, costUsd: null }, agents: [], stages: [] };
const record = { id: RUN, graph: 'fanout', status: 'running', step: 2, lastSeq: 10, createdTs: Date.now(), updatedTs: Date.now(), terminal: null, error: null, workspace: 'w', live: true, usage, workflow: 'fanout', request: 'fan out' };

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium' });
const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
const page = await ctx.newPage();
const json = (body) => ({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });
await page.route('**/api/**', (route) => {
  const u = new URL(route.request().url());
  const p = decodeURIComponent(u.pathname);
  if (p === '/api/workspaces') return route.fulfill(json([{ id: 'w', root: '/tmp/w' }]));
  if (p === `/api/workflows/${RUN}/graph`) return route.fulfill(json(graph));
  if (p === `/api/workflows/${RUN}`) return route.fulfill(json(record));
  if (p === `/api/workflows/${RUN}/usage`) return route.fulfill(json(usage));
  if (p.startsWith('/api/streams/')) return route.fulfill(json([]));
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
// Arrival times of frames, and a probe that stamps the frame after the DOM changed.
await page.addInitScript(() => {
  const w = window;
  w.__lat = [];
  const Orig = w.WebSocket;
  w.WebSocket = class extends Orig {
    constructor(...a) {
      super(...a);
      this.addEventListener('message', (e) => {
        const f = JSON.parse(e.data);
        if (f.type !== 'event') return;
        const t0 = performance.now();
        const sel = `[data-testid="graph-group-review"]`;
        const want = f.event.want;
        const check = () => {
          const g = document.querySelector(sel);
          if (g && new RegExp('(^|[ :,])' + want + '(,|$)').test(g.getAttribute('aria-label'))) requestAnimationFrame(() => w.__lat.push(performance.now() - t0));
          else requestAnimationFrame(check);
        };
        queueMicrotask(check);
      });
    }
  };
});
await page.goto(`${url}/#/runs/${RUN}/graph`);
await page.waitForSelector('[data-testid="graph-group-review"]', { timeout: 30000 });
const t = Date.now();
let seq = 10;
let running = 0;
let done = 0;
const total = Math.min(RATE * SECONDS, N * 2);
for (let i = 0; i < total; i++) {
  const k = Math.floor(i / 2);
  const toRunning = i % 2 === 0;
  if (toRunning) running++;
  else {
    running--;
    done++;
  }
  const want = done ? `${done} COMPLETED` : `${running} RUNNING`;
  send?.({
    type: 'event', name: 'graph:node_status_changed', workspace: 'w', stream: `run:${RUN}`, seq: ++seq, ts: Date.now(),
    event: { type: 'nodeTransition', node: `review/agent_${k}`, attempt: 1, from: toRunning ? 'READY' : 'RUNNING', to: toRunning ? 'RUNNING' : 'COMPLETED', want },
  });
  await new Promise((r) => setTimeout(r, 1000 / RATE));
}
await page.waitForTimeout(500);
const lat = (await page.evaluate(() => window.__lat)).sort((a, b) => a - b);
const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
const mem = await page.evaluate(() => performance.memory?.usedJSHeapSize ?? null);
console.log(JSON.stringify({ children: N, rate: RATE, events: total, measured: lat.length, p50_ms: q(0.5)?.toFixed(1), p95_ms: q(0.95)?.toFixed(1), max_ms: lat[lat.length - 1]?.toFixed(1), seconds: (Date.now() - t) / 1000, heap_mb: mem && (mem / 2 ** 20).toFixed(1) }));
await page.screenshot({ path: process.env.SHOT ?? '/tmp/fanout.png' });
await browser.close();
