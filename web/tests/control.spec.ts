// Controlling whole runs: a run left running by a server that was killed is resumed from its
// header; another is cancelled; the runs list's status filter; a finished stage sent back for a
// revision with feedback, which reaches the agent's next model request.
import { test, expect, newRun, seen, systemOf } from './fixtures';
import { startTrellis, trellisBin } from './server.mjs';

test('a run orphaned by a killed server is resumed from its header; another is cancelled; the status filter finds them', async ({ page }) => {
  test.setTimeout(150_000);
  // Its own server: this test kills it.
  const srv = await startTrellis({ pace: 300, bin: trellisBin() });
  try {
    await page.goto(`${srv.url}/login?token=${srv.token}`);
    await expect(page.getByTestId('nav-runs')).toBeVisible();
    const id = await newRun(page, 'Discuss where the stock is kept [slow]');
    const analysis = page.getByTestId('graph-node-architectural_analysis');
    await expect(analysis).toHaveAttribute('data-state', 'RUNNING', { timeout: 30_000 });

    // The server dies mid-run; the next one is told not to resume what it finds.
    await srv.restart(['--no-resume']);
    await page.goto(`${srv.url}/login?token=${srv.token}`);
    await page.goto(`${srv.url}/#/runs/${id}/graph`);
    const run = page.getByTestId('run-page');
    await expect(run).toHaveAttribute('data-status', 'running');
    const resume = page.getByTestId('run-resume');
    await expect(resume).toBeVisible(); // running in the store, but no server drives it
    await resume.click();
    await expect(resume).toBeHidden(); // driven again
    // The agent that was running when the server died goes on from its recorded turns, to the end.
    await expect(run).toHaveAttribute('data-status', 'succeeded', { timeout: 60_000 });
    await expect(analysis).toHaveAttribute('data-state', 'COMPLETED');
    const events = await (await page.request.get(`${srv.url}/api/workflows/${id}/events`)).json();
    expect(JSON.stringify(events)).toContain('runResumed');

    // Another run, cancelled through its confirmation while its agent works.
    const other = await newRun(page, 'Discuss where the orders are kept [slow]');
    await expect(analysis).toHaveAttribute('data-state', 'RUNNING', { timeout: 30_000 });
    await page.getByTestId('run-cancel').click();
    const dialog = page.getByTestId('cancel-dialog');
    await dialog.getByTestId('confirm-cancel').click();
    await expect(dialog).toBeHidden();
    await expect(run).toHaveAttribute('data-status', 'running');
    await page.getByTestId('run-cancel').click();
    await dialog.getByTestId('confirm-ok').click();
    await expect(run).toHaveAttribute('data-status', 'cancelled');
    await expect(page.getByTestId('run-cancel')).toBeDisabled();
    const graph = await (await page.request.get(`${srv.url}/api/workflows/${other}/graph`)).json();
    expect(graph.status).toBe('cancelled');

    // The runs list filtered by status.
    await page.getByTestId('nav-runs').click();
    const rows = page.getByTestId('run-row');
    await expect(rows).toHaveCount(2);
    await page.getByTestId('filter-status').selectOption('cancelled');
    await expect(rows).toHaveCount(1);
    await expect(rows.first()).toHaveAttribute('data-run', other);
    await page.getByTestId('filter-status').selectOption('succeeded');
    await expect(rows).toHaveCount(1);
    await expect(rows.first()).toHaveAttribute('data-run', id);
    await page.getByTestId('filter-status').selectOption('failed');
    await expect(page.getByTestId('runs-empty')).toBeVisible();
    // The filter is in the address: a reload keeps it.
    await page.reload();
    await expect(page.getByTestId('filter-status')).toHaveValue('failed');
    await page.getByTestId('filter-status').selectOption('');
    await expect(rows).toHaveCount(2);
  } finally {
    await srv.stop();
  }
});

test('a finished stage sent back with feedback runs again and its agent reads the feedback', async ({ page, trellis, seenBefore }) => {
  const feedback = 'Say how reservations expire, too.';
  const id = await newRun(page, 'Where are reservations kept?');
  const run = page.getByTestId('run-page');
  await expect(run).toHaveAttribute('data-status', 'succeeded', { timeout: 60_000 });

  // Not offered while a run goes on, nor on nodes with no work: here it is offered.
  const analysis = page.getByTestId('graph-node-architectural_analysis');
  await analysis.click();
  const panel = page.getByTestId('node-panel');
  await expect(panel).toHaveAttribute('data-node', 'architectural_analysis');
  await expect(panel.getByTestId('node-attempt')).toHaveText('1');
  const form = panel.getByTestId('node-revise');
  await form.locator('summary').click();
  await expect(panel.getByTestId('revise-send')).toBeDisabled(); // nothing to send yet
  await panel.getByTestId('revise-feedback').fill(feedback);
  await panel.getByTestId('revise-send').click();
  await expect(panel.getByTestId('revise-error')).toHaveCount(0);

  // The stage runs again (attempt 2) and the run finishes again.
  await expect(panel.getByTestId('node-attempt')).toHaveText('2');
  await expect(run).toHaveAttribute('data-status', 'succeeded', { timeout: 60_000 });
  await expect(analysis).toHaveAttribute('data-state', 'COMPLETED');
  await expect(panel.getByTestId('node-revise')).toBeVisible();

  // The analysis agent's requests after the revision carry the feedback.
  const bodies = (await seen(trellis)).slice(seenBefore).filter((b) => systemOf(b).includes('software architect'));
  expect(bodies.some((b) => JSON.stringify(b.messages).includes(feedback)), 'the feedback reached the agent').toBe(true);
  const events = await (await page.request.get(`/api/workflows/${id}/events`)).json();
  expect(JSON.stringify(events)).toContain('runStatusChanged');
});
