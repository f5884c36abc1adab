// Fixtures of the browser tests: one real `trellis serve` (with the loopback mock model, see
// tests/server.mjs) per test worker, a page logged in through `/login?token=…`, and helpers.
//
//   trellis  — {url, token, mock, repo, …} of the worker's server; stopped after the last test
//              of the worker, also when tests fail (a failed test restarts the worker: a fresh
//              server)
//   page     — logged in (the session cookie is set), at `/`
//   shot()   — a screenshot: into docs/ui/ when UPDATE_SCREENSHOTS=1, else the test's output dir
//   axe()    — the serious and critical violations of the page, in light and in dark
import { test as base, expect } from '@playwright/test';
import type { Page, TestInfo } from '@playwright/test';
import AxeBuilder from '@axe-core/playwright';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTrellis, trellisBin } from './server.mjs';

export interface Trellis {
  url: string;
  token: string;
  login: string;
  mock: string;
  repo: string;
  stop(): Promise<void>;
}

const docsUi = join(dirname(fileURLToPath(import.meta.url)), '../../docs/ui');

export const test = base.extend<{ seenBefore: number }, { trellis: Trellis }>({
  trellis: [
    // eslint-disable-next-line no-empty-pattern -- Playwright reads the fixture's dependencies from this pattern
    async ({}, use) => {
      const bin = trellisBin();
      const srv = await startTrellis({ pace: 300, bin });
      console.log(`trellis serve (${bin}) on ${srv.url}, mock model on ${srv.mock}`);
      try {
        const index = await (await fetch(`${srv.url}/`)).text();
        if (!index.includes('id="app"')) {
          throw new Error('this trellis binary has no web UI embedded: build web/dist (bash scripts/setup.d/60-web.sh), then `cargo build -p trellis`');
        }
        await use(srv);
      } finally {
        await srv.stop();
      }
    },
    { scope: 'worker', timeout: 90_000 },
  ],
  baseURL: async ({ trellis }, use) => use(trellis.url),
  page: async ({ page, trellis }, use) => {
    await page.goto(`/login?token=${trellis.token}`);
    await expect(page.getByTestId('nav-runs')).toBeVisible();
    await use(page);
  },
  // How many model requests the mock had seen when the test started.
  seenBefore: async ({ trellis }, use) => use((await seen(trellis)).length),
});
export { expect };

/** The request bodies the mock model received, in order. */
export async function seen(trellis: Trellis): Promise<any[]> {
  return (await fetch(`${trellis.mock}/seen`)).json();
}

/** The system prompt of a model request. */
export const systemOf = (body: any): string => String(body.messages?.[0]?.content ?? '');

/** Starts an architecture discussion from the runs page's form; resolves to the run's id (the page shows the run). */
export async function newRun(page: Page, request: string, opts: { document?: boolean; shot?: string; info?: TestInfo } = {}): Promise<string> {
  // On the server the page is on (a test may run its own), else the worker's.
  const origin = page.url().startsWith('http') ? new URL(page.url()).origin : '';
  await page.goto(`${origin}/#/runs?new=1`);
  await page.getByTestId('new-run-request').fill(request);
  await page.getByTestId('new-run-workflow').selectOption('architecture_discussion');
  await page.getByTestId('stage-decision_documentation').selectOption(opts.document ? 'include' : 'skip');
  if (opts.shot && opts.info) await shot(page, opts.shot, opts.info);
  await page.getByTestId('new-run-submit').click();
  const run = page.getByTestId('run-page');
  await expect(run).toBeVisible();
  return (await run.getAttribute('data-run'))!;
}

/**
 * A 1280×800 screenshot of the viewport: docs/ui/<name>.png when UPDATE_SCREENSHOTS=1 (the
 * pictures in docs/ui.md), else <outputDir>/<test>/<name>.png, so ordinary runs leave git alone.
 */
export async function shot(page: Page, name: string, info: TestInfo, opts: { top?: boolean } = {}): Promise<void> {
  let path: string;
  if (process.env.UPDATE_SCREENSHOTS === '1') {
    mkdirSync(docsUi, { recursive: true });
    path = join(docsUi, `${name}.png`);
  } else {
    path = info.outputPath(`${name}.png`);
  }
  // Let the last frames of a stream paint; no caret, no animation.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  if (opts.top) await page.evaluate(() => window.scrollTo(0, 0));
  // Toasts come and go with timing: not in the pictures.
  await page.screenshot({ path, animations: 'disabled', caret: 'hide', style: '[data-testid=toasts] { display: none !important; }' });
}

/**
 * Serious and critical axe violations of the page as it is, in the light and the dark scheme
 * (the app follows prefers-color-scheme unless the user picked a theme). Empty when clean.
 */
export async function axe(page: Page): Promise<string[]> {
  const out: string[] = [];
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const { violations } = await new AxeBuilder({ page }).analyze();
    for (const v of violations) {
      if (v.impact === 'serious' || v.impact === 'critical') {
        out.push(`${scheme}: ${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')}`);
      }
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  return out;
}
