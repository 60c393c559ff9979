// Two-factor login: a person turns it on from their account page (scanning is replaced by
// reading the key the page shows and computing the codes, as an authenticator app would), saves
// the recovery codes, and from then on logs in with a code after the password.
import {
  test,
  expect,
  uniqueEmail,
  uniqueId,
  signUpWithWorkspace,
  gotoHydrated,
  fillLogin,
  logOut,
  totpCode,
  PASSWORD,
} from "./helpers";

test("enrol TOTP from the account page and log in with a code", async ({ page }) => {
  test.setTimeout(120_000);
  const email = uniqueEmail("twofactor");
  await signUpWithWorkspace(page, email, `Two Factor ${uniqueId()}`);

  await gotoHydrated(page, "/account");
  await page.getByLabel("Confirm with your password").fill(PASSWORD);
  await page.getByRole("button", { name: "Set up two-factor authentication" }).click();
  await expect(page.getByRole("img", { name: "QR code for your authenticator app" })).toBeVisible();
  const secret = ((await page.getByTestId("totp-secret").textContent()) ?? "").trim();
  expect(secret).toMatch(/^[A-Z2-7]{32}$/);

  await page.getByLabel("2. Type the six digits it shows").fill(totpCode(secret));
  await page.getByRole("button", { name: "Turn on" }).click();
  await expect(page.getByTestId("recovery-codes").getByRole("listitem")).toHaveCount(10);
  await expect(page.getByTestId("two-factor-on")).toContainText("10 recovery codes left");

  // The password alone now leads to the second step.
  await logOut(page);
  await gotoHydrated(page, "/login");
  await fillLogin(page, email);
  await expect(page).toHaveURL(/\/login\/two-factor$/);
  await page.getByLabel("Code").fill("000000");
  await page.getByRole("button", { name: "Verify" }).click();
  await expect(page.getByText("That code is not right")).toBeVisible();
  // The next window's code: the current one was spent on turning it on.
  await page.getByLabel("Code").fill(totpCode(secret, Date.now() + 30_000));
  await page.getByRole("button", { name: "Verify" }).click();
  await expect(page.getByTestId("current-user")).toHaveText(email);
});
