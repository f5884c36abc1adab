// Seed 001's task_tree in the browser: the orchestrator picks it, and the run's Tasks tab shows
// the remit, the milestone and its tasks — one without a gap, one after another — as they
// complete, with the dependency and the attempts per stage.
import { test, expect, shot } from './fixtures';

test('task_tree: the Tasks tab shows the milestones and their tasks as they complete', async ({ page }, info) => {
  test.setTimeout(120_000);
  await page.goto('/#/runs?new=1');
  await page.getByTestId('new-run-request').fill('Add colony management [tree]');
  await page.getByTestId('new-run-submit').click();
  const run = page.getByTestId('run-page');
  await expect(run).toBeVisible();
  await expect(page.getByTestId('tab-tasks')).toBeVisible({ timeout: 30_000 });
  await page.getByTestId('tab-tasks').click();
  await expect(run).toHaveAttribute('data-status', 'succeeded', { timeout: 90_000 });
  await expect(page.getByTestId('tasks-remit')).toContainText('Colonies exist and are listed');
  const milestone = page.locator('[data-testid=milestone][data-id=m1]');
  await expect(milestone).toHaveAttribute('data-status', 'COMPLETE');
  for (const id of ['t1', 't2', 't3']) {
    await expect(milestone.locator(`[data-testid=task][data-id=${id}]`)).toHaveAttribute('data-status', 'COMPLETE');
  }
  const t3 = milestone.locator('[data-testid=task][data-id=t3]');
  await expect(t3).toContainText('t2');
  await expect(t3).toContainText('implementor 1');
  await expect(page.getByTestId('tasks-counts')).toContainText('3 tasks: 3 complete');
  await shot(page, 'tasks-tab', info);
});
