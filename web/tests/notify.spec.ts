// Browser notifications: off by default, the permission asked once when turned on, and a
// notification when a run finishes (docs/conventions.md, "Notifications").
import { test, expect, newRun } from './fixtures';

test('turned on, notifications ask the permission once and tell a finished run', async ({ page, context }) => {
  await context.grantPermissions(['notifications']);
  // Records the notifications the page creates and the permission requests, over the real API
  // (the permission the page sees starts as never asked, as in a new browser profile).
  await page.addInitScript(() => {
    const w = window as any;
    const Real = window.Notification;
    w.__notes = [];
    class Recorded extends Real {
      constructor(title: string, options?: NotificationOptions) {
        w.__notes.push({ title, body: options?.body ?? '', tag: options?.tag ?? '' });
        super(title, options);
      }
      static get permission(): NotificationPermission {
        return (sessionStorage.getItem('test.permission') as NotificationPermission) ?? 'default';
      }
      static async requestPermission(): Promise<NotificationPermission> {
        sessionStorage.setItem('test.asked', String(Number(sessionStorage.getItem('test.asked') ?? 0) + 1));
        const p = await Real.requestPermission();
        sessionStorage.setItem('test.permission', p);
        return p;
      }
    }
    w.Notification = Recorded;
  });
  await page.reload();
  const toggle = page.getByTestId('notify-toggle');
  await expect(toggle).toHaveAttribute('aria-pressed', 'false');
  const asked = () => page.evaluate(() => Number(sessionStorage.getItem('test.asked') ?? 0));
  expect(await asked()).toBe(0);

  await toggle.click();
  await expect(toggle).toHaveAttribute('aria-pressed', 'true');
  expect(await asked()).toBe(1);

  const id = await newRun(page, 'Where is the stock kept?');
  await expect(page.getByTestId('notify-toggle')).toHaveAttribute('aria-pressed', 'true');
  await expect(page.getByTestId('run-page')).toHaveAttribute('data-status', 'succeeded', { timeout: 60_000 });
  await expect
    .poll(() => page.evaluate(() => (window as any).__notes), { timeout: 15_000 })
    .toContainEqual(expect.objectContaining({ title: expect.stringMatching(new RegExp(`run ${id.slice(0, 8)} finished$`)) }));
  const notes: { tag: string }[] = await page.evaluate(() => (window as any).__notes);
  expect(notes.filter((n) => n.tag.startsWith(`${id}:finished:`))).toHaveLength(1);

  // Off and on again: the permission is not asked again.
  await page.getByTestId('notify-toggle').click();
  await expect(page.getByTestId('notify-toggle')).toHaveAttribute('aria-pressed', 'false');
  await page.getByTestId('notify-toggle').click();
  await expect(page.getByTestId('notify-toggle')).toHaveAttribute('aria-pressed', 'true');
  expect(await asked()).toBe(1);
});
