// The browser tests (`npx playwright test`, docs/ui.md "Tests"): the built UI embedded in a real
// `trellis serve` on loopback with the loopback mock model (tests/fixtures.ts), driven in
// Debian's headless Chromium ($CHROMIUM, default /usr/bin/chromium: Playwright's own browser
// download is not reachable here). One worker: a machine with 2 cores runs the server, the
// mock, the agents and the browser.
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: 'tests',
  testMatch: '*.spec.ts',
  outputDir: 'test-results',
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: 'list',
  timeout: 90_000,
  expect: { timeout: 30_000 },
  forbidOnly: !!process.env.CI,
  use: {
    browserName: 'chromium',
    headless: true,
    viewport: { width: 1280, height: 800 },
    deviceScaleFactor: 1,
    colorScheme: 'light',
    launchOptions: { executablePath: process.env.CHROMIUM || '/usr/bin/chromium' },
    actionTimeout: 15_000,
    screenshot: 'only-on-failure',
    trace: 'off',
  },
});
