// Steering a running graph: prune (with its confirmation, and disabled with the reason where
// the state forbids it) and the event socket killed mid-run (it reconnects and resumes from
// the last sequence number: every event exactly once).
import type { WebSocketRoute } from '@playwright/test';
import { test, expect, newRun, shot } from './fixtures';

test('prune: refused with the reason on finished work, a running agent pruned after confirmation', async ({ page }, info) => {
  const request = page.request; // the page's cookie
  const id = await newRun(page, 'Document the stock decision [slow]', { document: true });
  const analysis = page.getByTestId('graph-node-architectural_analysis');
  await expect(analysis).toHaveAttribute('data-state', 'RUNNING');

  // Finished work cannot be pruned: the button says why.
  await page.getByTestId('graph-node-upfront_retrieval').click();
  const panel = page.getByTestId('node-panel');
  await expect(panel).toHaveAttribute('data-node', 'upfront_retrieval');
  await expect(panel.getByTestId('prune-node')).toBeDisabled();
  await expect(panel.getByTestId('prune-disabled-reason')).toBeVisible();

  // The running agent: cancelling the dialog changes nothing…
  await analysis.click();
  await expect(panel).toHaveAttribute('data-node', 'architectural_analysis');
  await panel.getByTestId('prune-node').click();
  const dialog = page.getByTestId('prune-dialog');
  await expect(dialog).toBeVisible();
  await dialog.getByTestId('confirm-cancel').click();
  await expect(dialog).toBeHidden();
  await expect(analysis).toHaveAttribute('data-state', 'RUNNING');

  // …confirming prunes it, live.
  await panel.getByTestId('prune-node').click();
  await dialog.getByTestId('prune-reason').fill('Not needed: the ADR says it all.');
  await shot(page, 'prune-dialog', info);
  await dialog.getByTestId('confirm-ok').click();
  await expect(analysis).toHaveAttribute('data-state', 'PRUNED');
  await expect(panel).toHaveAttribute('data-state', 'PRUNED');
  const graph = await (await request.get(`/api/workflows/${id}/graph`)).json();
  expect(graph.nodes.find((n: any) => n.id === 'architectural_analysis').state).toBe('PRUNED');

  // A message to it now: the API's refusal is shown, not swallowed.
  await expect(page.getByTestId('run-page')).not.toHaveAttribute('data-status', 'running');
  await panel.getByTestId('node-message').fill('too late');
  await panel.getByTestId('node-message-send').click();
  await expect(panel.getByTestId('message-error')).toBeVisible();
});

test('the event socket killed mid-run: it reconnects and resumes, every event exactly once', async ({ page }) => {
  const request = page.request; // the page's cookie
  // Every event socket of the page goes through this proxy, which can kill it and refuse new ones.
  const live: WebSocketRoute[] = [];
  let refuse = false;
  await page.routeWebSocket(/\/api\/events$/, (ws) => {
    if (refuse) {
      void ws.close({ code: 1011, reason: 'refused by the test' });
      return;
    }
    const server = ws.connectToServer();
    live.push(ws);
    ws.onClose(() => void server.close());
  });
  await page.reload(); // the app's socket, opened at login, now goes through the route
  const id = await newRun(page, 'Document where the stock is kept [slow]', { document: true });
  const analysis = page.getByTestId('graph-node-architectural_analysis');
  await expect(analysis).toHaveAttribute('data-state', 'RUNNING');
  await analysis.click();
  const panel = page.getByTestId('node-panel');
  await expect(panel.getByTestId('turn').first()).toBeVisible();
  const conn = page.getByTestId('connection');
  await expect(conn).toHaveAttribute('data-state', 'open');
  const before = Number(await conn.getAttribute('data-reconnects'));

  // Kill it, and keep it down until the run has moved on (events the page must catch up on).
  const stored = async () => (await (await request.get(`/api/workflows/${id}/events?limit=10000`)).json()) as any[];
  const atKill = (await stored()).length;
  refuse = true;
  for (const ws of live.splice(0)) await ws.close({ code: 1011, reason: 'killed by the test' });
  await expect(conn).not.toHaveAttribute('data-state', 'open');
  await expect.poll(async () => (await stored()).length, { timeout: 30_000 }).toBeGreaterThan(atKill + 1);
  refuse = false;
  await expect(conn).toHaveAttribute('data-state', 'open');
  expect(Number(await conn.getAttribute('data-reconnects'))).toBeGreaterThan(before);

  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded', { timeout: 60_000 });
  // The graph agrees with the server's.
  const graph = await (await request.get(`/api/workflows/${id}/graph`)).json();
  for (const n of graph.nodes as any[]) {
    if (n.parent || !n.state) continue;
    await expect(page.getByTestId(`graph-node-${n.id}`)).toHaveAttribute('data-state', n.state);
  }
  // The transcript of the agent that streamed through the outage: each turn once.
  const sessions = (await (await request.get(`/api/workflows/${id}/sessions`)).json()) as any[];
  const session = sessions.find((s) => JSON.stringify(s.owner).includes('architectural_analysis'));
  const turns = (await (await request.get(`/api/sessions/${session.id}`)).json()).turns as any[];
  await expect(panel.getByTestId('turn')).toHaveCount(turns.length);
  // The event log: the run's stream as stored, each event once, none missing.
  await page.getByTestId('tab-events').click();
  const rows = page.locator('[data-testid=event-log] tbody tr');
  const all = await stored();
  await expect(rows).toHaveCount(all.length);
  const seqs = await rows.evaluateAll((r) => r.map((x) => Number(x.getAttribute('data-seq'))));
  expect(new Set(seqs).size).toBe(seqs.length);
  expect([...seqs].sort((a, b) => a - b)).toEqual(all.map((f) => f.seq).sort((a, b) => a - b));
});
