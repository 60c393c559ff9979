import { test, expect, uniqueEmail, gotoHydrated, mailedLink } from "./helpers";

// The password rule on the page that finishes sign-up is updated by a Leptos signal, which only
// runs once the wasm bundle has hydrated the server-rendered page. If the bundle fails to load or
// to hydrate, the rule never changes.
test("the sign-up page hydrates: the password rule reacts to typing", async ({ page }) => {
  const email = uniqueEmail("hydration");
  await gotoHydrated(page, "/signup");
  await page.getByLabel("Email", { exact: true }).fill(email);
  await page.getByRole("button", { name: "Create account" }).click();
  await expect(page.getByTestId("signup-sent")).toContainText(email);
  await page.goto(await mailedLink(page, email, /https?:\/\/\S+\/signup\/finish\?token=\S+/));

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
