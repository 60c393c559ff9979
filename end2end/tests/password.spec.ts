// A person who forgot their password asks for a link on the login page, reads the mail in the
// dev inbox, chooses a new password, logs in with it, then changes it from their account page
// and sees their sessions there.
import {
  test,
  expect,
  uniqueEmail,
  uniqueId,
  signUpWithWorkspace,
  gotoHydrated,
  fillLogin,
  logOut,
  mailedLink,
  PASSWORD,
} from "./helpers";

test("forgot password: from the login page through the dev inbox to a new password", async ({ page }) => {
  test.setTimeout(120_000);
  const email = uniqueEmail("forgetful");
  await signUpWithWorkspace(page, email, `Forgetful ${uniqueId()}`);
  await logOut(page);

  // --- Ask for a link from the login page. ---
  await gotoHydrated(page, "/login");
  await page.getByRole("link", { name: "Forgot your password?" }).click();
  await expect(page).toHaveURL(/\/forgot-password$/);
  await page.getByLabel("Email").fill(email);
  await page.getByRole("button", { name: "Send me a link" }).click();
  await expect(page.getByTestId("reset-sent")).toBeVisible();

  // --- The mail, in the dev inbox. ---
  const link = await mailedLink(page, email, /https?:\/\/\S+\/reset-password\?token=\S+/);

  // --- A new password, then log in with it. ---
  const fresh = `${PASSWORD} renewed`;
  await gotoHydrated(page, link);
  await page.getByLabel("New password").fill(fresh);
  await page.getByRole("button", { name: "Set the new password" }).click();
  await expect(page).toHaveURL(/\/login\?reset=done$/);
  await expect(page.getByText("Your password has been changed.")).toBeVisible();
  await fillLogin(page, email, PASSWORD);
  await expect(page.getByText("That email and password do not match an account.")).toBeVisible();
  await fillLogin(page, email, fresh);
  await expect(page.getByTestId("current-user")).toHaveText(email);

  // --- The account page: this session is listed; the password changes again. ---
  await page.getByTestId("current-user").click();
  await expect(page).toHaveURL(/\/account$/);
  await expect(page.getByTestId("session").filter({ hasText: "This device" })).toHaveCount(1);
  await page.getByLabel("Current password").fill(fresh);
  await page.getByLabel("New password").fill(`${fresh} again`);
  await page.getByRole("button", { name: "Change password" }).click();
  await expect(page.getByText("Password changed.")).toBeVisible();
});
