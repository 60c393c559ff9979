import { defineConfig, devices } from "@playwright/test";

// The browser tests run against a server that scripts/test.sh builds and starts (on its own
// port, database and mail catcher). To run them against `make dev` instead:
//   HERALD_E2E_BASE_URL=http://127.0.0.1:3000 npx playwright test
const baseURL = process.env.HERALD_E2E_BASE_URL ?? "http://127.0.0.1:3100";

export default defineConfig({
  testDir: "./tests",
  // Two workers share one server, database and mail catcher: every test works in a workspace and
  // with addresses of its own, and reads only its own mail from the catcher. The crawler's
  // routes are shared out among the workers too (see its `describe`).
  workers: Number(process.env.HERALD_E2E_WORKERS ?? 2),
  fullyParallel: false,
  retries: 0,
  timeout: 60_000,
  expect: { timeout: 10_000 },
  forbidOnly: !!process.env.CI,
  reporter: [["list"], ["html", { open: "never" }]],
  use: {
    baseURL,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    actionTimeout: 15_000,
    navigationTimeout: 30_000,
  },
  projects: [
    {
      name: "chromium",
      use: {
        ...devices["Desktop Chrome"],
        // Debian's Chromium: Playwright's own browser download is not available everywhere
        // Herald is tested. CHROMIUM_PATH overrides it (e.g. on a Mac).
        launchOptions: {
          executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
          args: [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
          ],
        },
      },
    },
  ],
});
