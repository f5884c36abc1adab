// The tool knowledge graph page: a finished run's tool calls are in the graph the server
// shows (GET /api/tools/graph), drawn and tabled, with the speculation threshold; axe-clean.
import { test, expect, newRun, axe, shot } from './fixtures';

test('the tools page shows what the agents taught the tool knowledge graph', async ({ page }, info) => {
  // The analysis agent of the mock reads files, one a turn.
  await newRun(page, 'Where is the stock kept?');
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded', { timeout: 60_000 });
  await page.getByTestId('nav-tools').click();
  await expect(page.getByTestId('tools-page')).toBeVisible();
  await expect(page.getByTestId('nav-tools')).toHaveAttribute('aria-current', 'page');
  await expect(page.getByTestId('tool-node-read_file')).toBeVisible();
  const row = page.locator('[data-testid=tool-row][data-tool=read_file]');
  await expect(row).toBeVisible();
  // Its call count is what the server reports.
  const graph = await page.evaluate(() => fetch('/api/tools/graph').then((r) => r.json()));
  const readFile = graph.nodes.find((n: { tool: string }) => n.tool === 'read_file');
  expect(readFile.calls).toBeGreaterThan(0);
  await expect(row).toContainText(`${readFile.calls} (${readFile.successes})`);
  await expect(page.getByTestId('tools-speculation')).toContainText('Speculation threshold 0.92');
  await shot(page, 'tools', info);
  expect(await axe(page), 'serious or critical axe violations').toEqual([]);
});
