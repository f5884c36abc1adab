// The review of a run's change set: a line comment and request changes (the stage runs again
// with the feedback), some hunks accepted and others rejected, apply to the working tree, undo.
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, newRun, seen, shot, systemOf } from './fixtures';
import { root } from './server.mjs';

test('review: comment a line, request changes, accept some hunks, apply, undo', async ({ page, trellis, seenBefore }, info) => {
  const adr = join(trellis.repo, 'docs/adr/0002-persist.md');
  const arch = join(trellis.repo, 'docs/architecture.md');
  const archBefore = readFileSync(join(root, 'examples/inventory/docs/architecture.md'), 'utf8');
  const id = await newRun(page, 'Document the stock decision', { document: true });
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded');

  // The change set: the new ADR (one hunk) and docs/architecture.md (two hunks), all accepted.
  await page.getByTestId('tab-review').click();
  const review = page.getByTestId('review');
  await expect(review.getByTestId('review-file')).toHaveCount(2);
  await expect(review.getByTestId('hunk')).toHaveCount(3);
  await expect(review.getByTestId('review-selected')).toHaveText('3');
  const adrFile = review.locator('[data-testid=review-file][data-path="docs/adr/0002-persist.md"]');
  await expect(adrFile).toContainText('Status: Proposed');
  await expect(adrFile.locator('.hljs-section, .hljs-strong, .hljs-emphasis, [class^=hljs-]').first()).toBeVisible(); // highlighted

  // A comment on the Status line, then request changes: the documentation stage runs again.
  await adrFile.getByRole('button', { name: 'Comment on docs/adr/0002-persist.md:3' }).click();
  await adrFile.getByTestId('line-comment-text').fill('Status must be Accepted.');
  await adrFile.getByTestId('line-comment-save').click();
  await expect(adrFile.getByTestId('line-comment')).toContainText('Status must be Accepted.');
  await review.getByTestId('request-changes-text').fill('We decided: SQLite.');
  await review.locator('summary', { hasText: 'What will be sent' }).click();
  await expect(review.getByTestId('request-changes-preview')).toContainText('docs/adr/0002-persist.md:3');
  await review.getByTestId('request-changes-submit').click();
  await page.getByTestId('tab-graph').click();
  await expect(page.getByTestId('graph-node-decision_documentation')).toHaveAttribute('data-attempt', '2');
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded');
  const feedback = (await seen(trellis))
    .slice(seenBefore)
    .filter((b) => systemOf(b).includes('technical writer'))
    .map((b) => JSON.stringify(b.messages));
  expect(feedback.some((t) => t.includes('docs/adr/0002-persist.md:3') && t.includes('We decided: SQLite.'))).toBe(true);

  // The new change set: accept the ADR and the first architecture hunk, reject the second.
  await page.getByTestId('tab-review').click();
  await expect(adrFile).toContainText('Status: Accepted');
  await expect(review.getByTestId('line-comment')).toHaveCount(0); // sent, so gone
  const archFile = review.locator('[data-testid=review-file][data-path="docs/architecture.md"]');
  await expect(archFile.getByTestId('hunk')).toHaveCount(2);
  await archFile.locator('[data-testid=hunk][data-hunk="1"]').getByTestId('hunk-toggle').click();
  await expect(archFile.locator('[data-testid=hunk][data-hunk="1"]')).toHaveAttribute('data-accepted', 'false');
  await expect(archFile.locator('[data-testid=hunk][data-hunk="0"]')).toHaveAttribute('data-accepted', 'true');
  await expect(review.getByTestId('review-selected')).toHaveText('2');
  await expect(archFile.getByTestId('file-accept')).not.toBeChecked();
  await shot(page, 'review', info, { top: true });

  // Apply: the accepted hunks only reach the working tree.
  await review.getByTestId('review-apply').click();
  await expect(review.getByTestId('review-outcome')).toContainText('Applied');
  expect(readFileSync(adr, 'utf8')).toContain('Status: Accepted');
  const applied = readFileSync(arch, 'utf8');
  expect(applied).toContain('# Architecture of the inventory service');
  expect(applied).not.toContain('Decided: SQLite');

  // Undo: the working tree as it was.
  await review.getByTestId('review-undo').click();
  await expect(review.getByTestId('review-outcome')).toContainText('undone');
  expect(existsSync(adr)).toBe(false);
  expect(readFileSync(arch, 'utf8')).toBe(archBefore);
  expect(id).toBeTruthy();
});
