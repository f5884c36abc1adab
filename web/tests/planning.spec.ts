// Planning is the run's first node: a new run's page opens while the orchestrator still
// thinks (the mock answers it 6 s late), shows the planning node running, and then the
// chosen workflow's stages without a reload; the runs list names the workflow once chosen.
import { test, expect } from './fixtures';

test('a new run opens at once and shows its planning, then its workflow', async ({ page }) => {
  await page.goto('/#/runs?new=1');
  await page.getByTestId('new-run-request').fill('Discuss where the stock is kept [plan-slow]');
  // No workflow chosen: the orchestrator decides.
  await page.getByTestId('new-run-submit').click();
  const run = page.getByTestId('run-page');
  await expect(run).toBeVisible();
  const id = (await run.getAttribute('data-run'))!;

  // The orchestrator has not answered yet: the run's only node plans.
  const planning = page.getByTestId('graph-node-orchestrate');
  await expect(planning).toHaveAttribute('data-state', 'RUNNING');
  await expect(page.getByTestId('graph-node-architectural_analysis')).toHaveCount(0);

  // It answers: the workflow's stages appear on the same page, planning done.
  await expect(page.getByTestId('graph-node-architectural_analysis')).toBeVisible({ timeout: 30_000 });
  await expect(planning).toHaveAttribute('data-state', 'COMPLETED');

  // The runs list names the chosen workflow.
  await page.goto('/#/runs');
  await expect(page.locator(`[data-testid=run-row][data-run="${id}"]`)).toContainText('architecture_discussion', { timeout: 15_000 });
});
