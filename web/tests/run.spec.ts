// A run watched live: the runs list, the new-run form, node states changing without a reload,
// a question answered, a message reaching a running agent's next model request, an approval
// gate, the keyboard.
import type { Page } from '@playwright/test';
import { test, expect, newRun, seen, shot, systemOf } from './fixtures';

/** Records every graph node's state changes from now on (window.__states: "node:STATE", in order). */
async function recordStates(page: Page) {
  await page.evaluate(() => {
    const w = window as any;
    w.__states = [];
    w.__noReload = true;
    const last = new Map<string, string>();
    const scan = () => {
      for (const el of document.querySelectorAll('[data-testid^="graph-node-"]')) {
        const id = el.getAttribute('data-testid')!.slice('graph-node-'.length);
        const s = el.getAttribute('data-state') ?? '';
        if (last.get(id) !== s) {
          last.set(id, s);
          w.__states.push(`${id}:${s}`);
        }
      }
    };
    scan();
    new MutationObserver(scan).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] });
  });
}

test('without the token the UI says how to sign in', async ({ browser, trellis }) => {
  const ctx = await browser.newContext();
  try {
    const page = await ctx.newPage();
    await page.goto(`${trellis.url}/#/runs`);
    await expect(page.getByTestId('login-screen')).toContainText('/login?token=');
  } finally {
    await ctx.close();
  }
});

test('a run updates live: node states, a question answered, a message to a running agent', async ({ page, trellis }, info) => {
  const message = 'Also look at reserve() before you answer.';
  const id = await newRun(page, 'Discuss where the stock is kept [ask] [slow]', { shot: 'new-run', info });
  await recordStates(page);

  // The analysis agent asks; the run waits for the user.
  const analysis = page.getByTestId('graph-node-architectural_analysis');
  await expect(analysis).toHaveAttribute('data-state', 'WAITING_INPUT');
  await expect(page.getByTestId('approvals-count')).toHaveText('1');
  await page.getByTestId('tab-approvals').click();
  const question = page.locator('[data-testid=interrupt][data-kind=question]');
  await expect(question).toContainText('Which store should persist the stock?');
  await question.getByTestId('answer-option').filter({ hasText: 'SQLite' }).click();
  await question.getByTestId('answer-1').fill('Reservations must survive a restart.');
  await shot(page, 'approvals-question', info);
  await question.getByTestId('answer-submit').click();
  await expect(page.getByTestId('interrupts-empty')).toBeVisible();

  // Back on the graph: the agent runs again. Open its panel with the keyboard.
  await page.getByTestId('tab-graph').click();
  await expect(analysis).toHaveAttribute('data-state', 'RUNNING');
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'running'); // no longer waiting
  await analysis.focus();
  await page.keyboard.press('Enter');
  const panel = page.getByTestId('node-panel');
  await expect(panel).toHaveAttribute('data-node', 'architectural_analysis');
  await expect(panel.getByTestId('tool-call').first()).toBeVisible();

  // A message while it runs: shown in the transcript, then in the agent's next model request.
  await panel.getByTestId('node-message').fill(message);
  await panel.getByTestId('node-message-send').click();
  await expect(panel.getByTestId('node-message')).toHaveValue('');
  await expect(panel.getByTestId('message-error')).toHaveCount(0);
  await shot(page, 'run-live', info);
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded', { timeout: 60_000 });
  await expect(analysis).toHaveAttribute('data-state', 'COMPLETED');
  await expect(panel.getByTestId('transcript')).toContainText(message);
  await expect(panel.getByTestId('node-result')).toContainText('MOCK-ANALYSIS');
  await panel.getByTestId('thinking').last().locator('summary').click();
  await shot(page, 'node-transcript', info);

  // What the model saw: the answers, then the message, in the analysis agent's requests.
  const bodies = (await seen(trellis)).filter((b) => systemOf(b).includes('software architect') && !b.response_format);
  const text = bodies.map((b) => JSON.stringify(b.messages));
  const answered = text.findIndex((t) => t.includes('Reservations must survive a restart.'));
  const messaged = text.findIndex((t) => t.includes(message));
  expect(answered, 'the answer reached the agent').toBeGreaterThanOrEqual(0);
  expect(text[answered]).toContain('SQLite');
  expect(messaged, 'the message reached the agent').toBeGreaterThan(answered);

  // Every state was seen change in place: no reload, and in order.
  const states: string[] = await page.evaluate(() => (window as any).__states);
  expect(await page.evaluate(() => (window as any).__noReload)).toBe(true);
  const mine = states.filter((s) => s.startsWith('architectural_analysis:'));
  expect(mine.indexOf('architectural_analysis:WAITING_INPUT')).toBeLessThan(mine.lastIndexOf('architectural_analysis:RUNNING'));
  expect(mine.at(-1)).toBe('architectural_analysis:COMPLETED');

  // The runs list shows it, with its stage and status.
  await page.getByTestId('nav-runs').click();
  const row = page.locator(`[data-testid=run-row][data-run="${id}"]`);
  await expect(row).toHaveAttribute('data-status', 'succeeded');
});

test('an approval gate: the command runs once allowed', async ({ page, trellis, seenBefore }, info) => {
  await newRun(page, 'Document the stock decision [gate]', { document: true });
  await expect(page.getByTestId('approvals-count')).toHaveText('1');
  await expect(page.getByTestId('graph-node-decision_documentation')).toHaveAttribute('data-state', 'WAITING_INPUT');
  await page.getByTestId('tab-approvals').click();
  const gate = page.locator('[data-testid=interrupt][data-kind=approval]');
  await expect(gate).toContainText('curl');
  await gate.locator('summary').click();
  await gate.getByTestId('approval-comment').fill('Fine: loopback only.');
  await shot(page, 'approvals-gate', info);
  await gate.getByTestId('approval-allow').click();
  await expect(page.getByTestId('interrupts-empty')).toBeVisible();
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded');
  // The agent's next request carries the command's result (it ran: curl's own failure).
  const results = (await seen(trellis))
    .slice(seenBefore)
    .flatMap((b) => (b.messages ?? []) as any[])
    .filter((m) => m.role === 'tool' && m.tool_call_id === 'call_net');
  expect(results.length).toBeGreaterThan(0);
  expect(JSON.stringify(results[0].content)).not.toMatch(/denied/i);
});
