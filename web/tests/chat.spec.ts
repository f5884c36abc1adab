// Channel chat: a new conversation, an answer that streams in with its thinking and tool call,
// file:line citations as editor links, a second message in the same conversation, the
// conversation listed under its channel.
import { test, expect, shot } from './fixtures';

test('channel chat: a streamed answer with file:line citations', async ({ page, trellis }, info) => {
  await page.getByTestId('nav-channels').click();
  await page.getByTestId('new-chat-channel').fill('design');
  await page.getByTestId('new-chat-submit').click();
  await expect(page.getByTestId('chat-page')).toBeVisible();
  await expect(page.getByTestId('chat-page')).toContainText('#design');

  // Record the answer's length as it renders: a streamed answer grows in several steps.
  await page.evaluate(() => {
    const w = window as any;
    w.__lengths = [];
    new MutationObserver(() => {
      const t = [...document.querySelectorAll('[data-testid=turn-text]')].at(-1)?.textContent ?? '';
      if (t.length && w.__lengths.at(-1) !== t.length) w.__lengths.push(t.length);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  // Ctrl+Enter sends from the keyboard.
  await page.getByTestId('chat-input').fill('Where is stock kept?');
  await page.getByTestId('chat-input').press('Control+Enter');
  const turn = page.getByTestId('turn').last();
  await expect(turn).toHaveAttribute('data-status', 'completed');
  await expect(turn.getByTestId('turn-text')).toContainText('You asked: Where is stock kept?');
  await expect(page.getByTestId('tool-call').first()).toHaveAttribute('data-tool', 'read_file'); // the turn before
  await expect(turn.getByTestId('thinking')).toContainText('Looking for where stock lives.');
  const lengths: number[] = await page.evaluate(() => (window as any).__lengths);
  expect(lengths.length, `the answer rendered in steps: ${lengths.join(', ')}`).toBeGreaterThan(1);

  const cite = page.locator('[data-testid=citation][data-path="inventory.py"][data-line="1"]').last();
  await expect(cite).toHaveAttribute('href', `vscode://file${trellis.repo}/inventory.py:1`);
  await expect(page.locator('[data-testid=citation][data-path="README.md"][data-line="3"]').last()).toBeVisible();
  await page.getByTestId('thinking').last().locator('summary').click();
  await shot(page, 'chat', info);

  // The same conversation goes on.
  await page.getByTestId('chat-input').fill('And the reservations?');
  await page.getByTestId('chat-send').click();
  await expect(page.getByTestId('turn-text').last()).toContainText('You asked: And the reservations?');

  // Listed under its channel.
  const session = page.url().split('/chat/')[1];
  await page.getByTestId('nav-channels').click();
  await expect(page.locator('[data-testid=channel][data-channel=design] [data-testid=channel-session]').first()).toHaveAttribute('href', `#/chat/${session}`);
});
