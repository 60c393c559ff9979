import { test, expect } from "./helpers";

// The password rule on /signup is updated by a Leptos signal, which only runs once the wasm
// bundle has hydrated the server-rendered page. If the bundle fails to load or to hydrate, the
// rule never changes.
test("the sign-up page hydrates: the password rule reacts to typing", async ({ page }) => {
  await page.goto("/signup");
  const rule = page.locator("#password-rules");
  const password = page.getByLabel("Password", { exact: true });
  await expect(rule).toContainText("At least 10 characters (up to 128)");

  // Typing before hydration changes nothing; retry until the handler is attached.
  await expect(async () => {
    await password.fill("");
    await password.fill("a long enough passphrase");
    await expect(rule).toHaveText("✓ At least 10 characters", { timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  await expect(rule).toHaveClass(/text-emerald-600/);

  // And back: nine characters are not enough.
  await password.fill("too short");
  await expect(rule).toContainText("At least 10 characters (up to 128)");
  await expect(rule).not.toHaveClass(/text-emerald-600/);
});
