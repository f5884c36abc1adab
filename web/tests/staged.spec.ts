// Seed 003's staged_review in the browser: the orchestrator picks it, each stage's artifact
// (scope card, research card, plan, review) waits in the approvals view rendered as markdown,
// changes requested there send it back to its producer with the feedback, and a review that
// asks for a human (HUMAN_REVIEW_REQUESTED) waits until a person approves it.
import type { Page } from '@playwright/test';
import { test, expect, seen, shot, systemOf } from './fixtures';

/** The artifact of `kind` waiting for approval. */
function waiting(page: Page, kind: string) {
  return page.locator(`[data-testid=artifact][data-kind=${kind}][data-status=awaiting_approval]`);
}

test('staged_review: artifacts approved or sent back from the approvals view; a human review waits for a person', async ({ page, trellis }, info) => {
  test.setTimeout(180_000);
  await page.goto('/#/runs?new=1');
  await page.getByTestId('new-run-request').fill('Fix the stock bookkeeping of commit [staged] [human]');
  await page.getByTestId('new-run-submit').click();
  const run = page.getByTestId('run-page');
  await expect(run).toBeVisible();
  const id = (await run.getAttribute('data-run'))!;
  await expect(run).toHaveAttribute('data-status', 'waitingInput', { timeout: 60_000 });
  await page.getByTestId('tab-approvals').click();

  // The scope card, rendered; sent back with feedback.
  const scope = waiting(page, 'scope_card');
  await expect(scope).toBeVisible();
  await expect(scope.getByRole('heading', { name: 'In scope' })).toBeVisible();
  await expect(scope).toContainText('the CLI');
  await shot(page, 'approvals-artifact', info);
  await scope.getByTestId('artifact-feedback').fill('Inventory.commit only, please');
  await scope.getByTestId('artifact-request-changes').click();
  await expect(page.locator('[data-testid=artifact][data-kind=scope_card][data-status=changes_requested]')).toBeVisible();

  // Version 2 says what the feedback asked for; approved, then the research card and plan.
  const v2 = waiting(page, 'scope_card');
  await expect(v2).toContainText('Inventory.commit only', { timeout: 30_000 });
  await expect(v2).toContainText('v2');
  await v2.getByTestId('artifact-approve').click();
  for (const kind of ['research_card', 'plan']) {
    const card = waiting(page, kind);
    await expect(card).toBeVisible({ timeout: 30_000 });
    await card.getByTestId('artifact-approve').click();
    await expect(page.locator(`[data-testid=artifact][data-kind=${kind}][data-status=approved]`)).toBeVisible();
  }

  // Execution and review run on their own; the reviewer asks for a human.
  const human = page.locator('[data-testid=interrupt][data-kind=review][data-node=review]');
  await expect(human).toBeVisible({ timeout: 30_000 });
  await expect(human).toContainText('human review');
  await human.getByTestId('review-approve').click();
  await expect(human).toBeHidden();

  // The review's own record waits like the other artifacts; approving it ends the run.
  const review = waiting(page, 'review');
  await expect(review).toBeVisible({ timeout: 30_000 });
  await review.getByTestId('artifact-approve').click();
  await expect(run).toHaveAttribute('data-status', 'succeeded', { timeout: 30_000 });

  // The feedback reached the scoping agent's next model request.
  const bodies = await seen(trellis);
  expect(bodies.some((b) => systemOf(b).includes('scoping a change request') && JSON.stringify(b.messages).includes('Inventory.commit only, please'))).toBe(true);
  const artifacts = await (await page.request.get(`/api/workflows/${id}/artifacts`)).json();
  expect(artifacts.filter((a: { kind: string }) => a.kind === 'scope_card').map((a: { status: string }) => a.status)).toEqual(['changes_requested', 'approved']);
});
