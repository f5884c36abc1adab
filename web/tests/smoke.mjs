/* global document */
// End-to-end smoke check of the built app against a real `trellis serve` (with the loopback
// mock model) in headless Chromium — what was verified by hand while building the UI, as one
// script, until the Playwright suite exists.
//
//   npm run build && npm i --no-save playwright-core @axe-core/playwright
//   CHROMIUM=$(command -v chromium) node tests/smoke.mjs
//
// Starts tests/dev-server.mjs and `vite preview` (serving dist/, proxying the API to the
// server), runs the scenarios, stops both. Prints "N passed, N failed".
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import AxeBuilder from '@axe-core/playwright';

const here = dirname(fileURLToPath(import.meta.url));
const web = join(here, '..');
const children = [];
const stop = () => children.forEach((c) => c.kill('SIGTERM'));
process.on('exit', stop);

function start(cmd, args, env, re) {
  const c = spawn(cmd, args, { cwd: web, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(c);
  return new Promise((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`${cmd} ${args.join(' ')}: not ready`)), 60_000);
    createInterface({ input: c.stdout }).on('line', (l) => {
      const m = l.match(re);
      if (m) {
        clearTimeout(t);
        ok(m);
      }
    });
  });
}

const [line] = await start(process.execPath, ['tests/dev-server.mjs'], {}, /^\{.*\}$/);
const srv = JSON.parse(line);
const port = 4100 + Math.floor(Math.random() * 800);
await start(process.execPath, ['node_modules/vite/bin/vite.js', 'preview', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], { TRELLIS_URL: srv.url }, /Local:/);
const BASE = `http://127.0.0.1:${port}`;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium' });
const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
const page = await ctx.newPage();
page.setDefaultTimeout(60_000);
await page.goto(`${BASE}/login?token=${srv.token}`);
const results = [];
async function check(name, f) {
  try {
    await f();
    results.push([name, true]);
    console.log(`ok   ${name}`);
  } catch (e) {
    results.push([name, false]);
    console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`);
  }
}
const assert = (c, m) => {
  if (!c) throw new Error(m);
};
async function newRun(request, include) {
  await page.goto(`${BASE}/#/runs?new=1`);
  await page.fill('[data-testid=new-run-request]', request);
  await page.selectOption('[data-testid=new-run-workflow]', 'architecture_discussion');
  await page.selectOption('[data-testid=stage-decision_documentation]', include ? 'include' : 'skip');
  await page.click('[data-testid=new-run-submit]');
  await page.waitForSelector('[data-testid=run-page]');
  return page.getAttribute('[data-testid=run-page]', 'data-run');
}

await check('login screen without a token', async () => {
  const p = await (await browser.newContext()).newPage();
  await p.goto(`${BASE}/#/runs`);
  await p.waitForSelector('[data-testid=login-screen]');
  await p.close();
});

let run;
await check('start a run; nodes change state live; answer a question; message a running agent', async () => {
  run = await newRun('Discuss the stock store [ask] [slow]', false);
  await page.waitForSelector('[data-testid=graph-node-architectural_analysis][data-state=WAITING_INPUT]');
  await page.click('[data-testid=tab-approvals]');
  await page.locator('[data-testid=answer-option]', { hasText: 'SQLite' }).click();
  await page.click('[data-testid=answer-submit]');
  await page.waitForSelector('[data-testid=interrupts-empty]');
  await page.click('[data-testid=tab-graph]');
  await page.waitForSelector('[data-testid=graph-node-architectural_analysis][data-state=RUNNING]');
  await page.click('[data-testid=graph-node-architectural_analysis]');
  await page.fill('[data-testid=node-message]', 'Also look at reserve().');
  await page.click('[data-testid=node-message-send]');
  await page.waitForSelector('[data-testid=run-page][data-status=succeeded]');
  const seen = await (await page.request.get(`${srv.mock}/seen`)).json();
  assert(seen.some((b) => JSON.stringify(b.messages).includes('Also look at reserve()')), 'the message never reached the model');
  assert(seen.some((b) => JSON.stringify(b.messages).includes('SQLite')), 'the answer never reached the model');
});

await check('reconnect after the socket drops: every event once', async () => {
  const id = await newRun('Discuss the stock store [slow]', false);
  await page.waitForSelector('[data-testid=graph-node-architectural_analysis][data-state=RUNNING]');
  const before = Number(await page.getAttribute('[data-testid=connection]', 'data-reconnects'));
  await page.evaluate(() => globalThis.__trellisSocket.drop());
  await page.waitForSelector(`[data-testid=connection][data-state=open][data-reconnects="${before + 1}"]`);
  await page.waitForSelector('[data-testid=run-page][data-status=succeeded]');
  await page.click('[data-testid=tab-events]');
  await page.waitForSelector('[data-testid=event-log] tbody tr');
  const seqs = await page.locator('[data-testid=event-log] tbody tr').evaluateAll((r) => r.map((x) => Number(x.getAttribute('data-seq'))));
  const stored = await (await page.request.get(`${BASE}/api/workflows/${id}/events?limit=10000`)).json();
  assert(new Set(seqs).size === seqs.length, 'an event twice');
  assert(seqs.length === stored.length, `${seqs.length} events shown, ${stored.length} stored`);
});

await check('prune: disabled with the reason on finished work; a running node pruned after confirmation', async () => {
  await newRun('Document the stock decision [slow]', true);
  await page.waitForSelector('[data-testid=graph-node-architectural_analysis][data-state=RUNNING]');
  await page.click('[data-testid=graph-node-upfront_retrieval]');
  assert(await page.isDisabled('[data-testid=prune-node]'), 'prune enabled on a COMPLETED node');
  await page.waitForSelector('[data-testid=prune-disabled-reason]');
  await page.click('[data-testid=graph-node-architectural_analysis]');
  await page.click('[data-testid=prune-node]');
  await page.click('[data-testid=prune-dialog] [data-testid=confirm-ok]');
  await page.waitForSelector('[data-testid=graph-node-architectural_analysis][data-state=PRUNED]');
  await page.waitForSelector('[data-testid=run-page]:not([data-status=running])');
  await page.fill('[data-testid=node-message]', 'too late');
  await page.click('[data-testid=node-message-send]');
  await page.waitForSelector('[data-testid=message-error]');
});

await check('approval gate: deny', async () => {
  await newRun('Document the stock decision [gate]', true);
  await page.waitForSelector('[data-testid=approvals-count]');
  await page.click('[data-testid=tab-approvals]');
  await page.click('[data-testid=interrupt][data-kind=approval] [data-testid=approval-deny]');
  await page.waitForSelector('[data-testid=interrupts-empty]');
  await page.waitForSelector('[data-testid=run-page][data-status=succeeded]');
});

await check('review: line comment + request changes, accept some hunks, apply, undo', async () => {
  const id = await newRun('Document the stock decision', true);
  await page.waitForSelector('[data-testid=run-page][data-status=succeeded]');
  await page.goto(`${BASE}/#/runs/${id}/review`);
  await page.locator('[data-testid=line-comment-button]').nth(2).click();
  await page.fill('[data-testid=line-comment-text]', 'Status must be Accepted.');
  await page.click('[data-testid=line-comment-save]');
  await page.click('[data-testid=request-changes-submit]');
  await page.click('[data-testid=tab-graph]');
  await page.waitForSelector('[data-testid=graph-node-decision_documentation][data-attempt="2"]');
  await page.waitForSelector('[data-testid=run-page][data-status=succeeded]');
  await page.click('[data-testid=tab-review]');
  await page.waitForFunction(() => document.querySelector('[data-testid=review]')?.textContent?.includes('Status: Accepted'));
  await page.click('[data-testid=hunk-toggle]');
  await page.waitForSelector('[data-testid=hunk][data-accepted=false]');
  await page.click('[data-testid=hunk-toggle]');
  await page.waitForSelector('[data-testid=hunk][data-accepted=true]');
  await page.click('[data-testid=review-apply]');
  await page.waitForSelector('[data-testid=review-outcome]');
  await page.click('[data-testid=review-undo]');
  await page.waitForFunction(() => document.querySelector('[data-testid=review-outcome]')?.textContent?.includes('undone'));
});

await check('channel chat streams an answer with file:line citations', async () => {
  await page.goto(`${BASE}/#/channels`);
  await page.fill('[data-testid=new-chat-channel]', 'design');
  await page.click('[data-testid=new-chat-submit]');
  await page.fill('[data-testid=chat-input]', 'Where is stock kept?');
  await page.click('[data-testid=chat-send]');
  await page.waitForSelector('[data-testid=citation][data-path="inventory.py"]');
});

for (const [name, path] of [
  ['runs', '/#/runs'],
  ['run graph', `/#/runs/${run}/graph?node=architectural_analysis`],
  ['approvals', `/#/runs/${run}/approvals`],
  ['channels', '/#/channels'],
]) {
  await check(`axe: no serious or critical violations (${name})`, async () => {
    await page.goto(`${BASE}${path}`);
    await page.waitForTimeout(1000);
    const { violations } = await new AxeBuilder({ page }).analyze();
    const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert(bad.length === 0, bad.map((v) => `${v.id}: ${v.nodes[0]?.html}`).join('; '));
  });
}

await browser.close();
const passed = results.filter(([, ok]) => ok).length;
console.log(`${passed} passed, ${results.length - passed} failed`);
stop();
process.exit(passed === results.length ? 0 : 1);
