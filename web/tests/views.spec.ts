// Accessibility: an axe scan of every main view in the state a user sees it (a run waiting for
// an answer, a finished run with a change set, a conversation…), in the light and the dark
// colour scheme: no serious or critical violations. Also the runs list and dark-mode pictures.
import type { Page } from '@playwright/test';
import { test, expect, newRun, axe, shot } from './fixtures';

async function clean(page: Page, view: string) {
  await test.step(`axe: ${view}`, async () => {
    expect.soft(await axe(page), `${view}: serious or critical axe violations`).toEqual([]);
  });
}

test('every main view passes axe (no serious or critical violations) in light and dark', async ({ page, browser, trellis }, info) => {
  // A run waiting for an answer: graph with the waiting node's panel, the approvals.
  await newRun(page, 'Document where the stock is kept [ask]', { document: true });
  const analysis = page.getByTestId('graph-node-architectural_analysis');
  await expect(analysis).toHaveAttribute('data-state', 'WAITING_INPUT');
  await analysis.click();
  await expect(page.getByTestId('node-interrupt')).toBeVisible();
  await clean(page, 'run graph, a node waiting for input');
  await page.getByTestId('tab-approvals').click();
  await expect(page.locator('[data-testid=interrupt][data-kind=question]')).toBeVisible();
  await clean(page, 'approvals with a question');
  await page.getByTestId('answer-option').filter({ hasText: 'Postgres' }).click();
  await page.getByTestId('answer-submit').click();
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded');

  // The finished run: graph with a transcript, review, event log.
  await page.getByTestId('tab-graph').click();
  await page.getByTestId('graph-node-decision_documentation').click();
  await expect(page.getByTestId('node-panel').getByTestId('transcript')).toBeVisible();
  await clean(page, 'run graph, a finished node and its transcript');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot(page, 'dark-graph', info);
  await page.emulateMedia({ colorScheme: 'light' });
  await page.getByTestId('tab-review').click();
  await expect(page.getByTestId('hunk').first()).toBeVisible();
  await clean(page, 'review');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot(page, 'dark-review', info);
  await page.emulateMedia({ colorScheme: 'light' });
  await page.getByTestId('tab-events').click();
  await expect(page.locator('[data-testid=event-log] tbody tr').first()).toBeVisible();
  await clean(page, 'event log');

  // The runs list, and the new-run form.
  await page.getByTestId('nav-runs').click();
  await expect(page.getByTestId('run-row').first()).toBeVisible();
  await shot(page, 'runs', info);
  await clean(page, 'runs list');
  await page.getByTestId('new-run-toggle').click();
  await expect(page.getByTestId('new-run-form')).toBeVisible();
  await clean(page, 'new-run form');

  // Channels and a conversation.
  await page.getByTestId('nav-channels').click();
  await page.getByTestId('new-chat-channel').fill('a11y');
  await page.getByTestId('new-chat-submit').click();
  await page.getByTestId('chat-input').fill('Where is stock kept?');
  await page.getByTestId('chat-send').click();
  await expect(page.getByTestId('citation').first()).toBeVisible();
  await clean(page, 'chat');
  await page.getByTestId('nav-channels').click();
  await expect(page.getByTestId('channel-session').first()).toBeVisible();
  await clean(page, 'channels');

  // The theme toggle overrides the system's scheme.
  await page.getByTestId('theme-toggle').click(); // system → light
  await page.getByTestId('theme-toggle').click(); // light → dark
  await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
  await clean(page, 'channels, dark theme picked in the header');
  await page.getByTestId('theme-toggle').click(); // back to the system's

  // The login screen (no cookie).
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const anon = await ctx.newPage();
    await anon.goto(`${trellis.url}/#/runs`);
    await expect(anon.getByTestId('login-screen')).toBeVisible();
    await clean(anon, 'login screen');
  } finally {
    await ctx.close();
  }
});
