import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, fillLogin, logOut, waitForHydration } from "./helpers";

test("sign up, create a workspace, log out and back in", async ({ page }) => {
  const email = uniqueEmail("owner");
  const workspace = `Acme Weekly ${uniqueId()}`;

  // A new account has no workspace yet, so it is sent to create one, then to its dashboard.
  await signUpWithWorkspace(page, email, workspace);

  await logOut(page);
  // Logging out usually navigates client-side (still hydrated), but if it reloaded the page,
  // wait for the new page to hydrate so the error below is rendered by the front end.
  await waitForHydration(page);

  // A wrong password is refused with a message, and the user stays on /login.
  await fillLogin(page, email, "not the right password");
  await expect(page.getByRole("alert")).toContainText("do not match");
  await expect(page).toHaveURL(/\/login(\?.*)?$/);

  // The right one lands on the dashboard of the workspace.
  await fillLogin(page, email);
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByRole("heading", { level: 1, name: workspace })).toBeVisible();
  await expect(page.getByTestId("current-user")).toHaveText(email);

  await logOut(page);
});

test("logged-out visitors are sent to the login page", async ({ page }) => {
  await page.goto("/settings/members");
  await expect(page).toHaveURL(/\/login\?next=/);
  await expect(page.getByRole("button", { name: "Log in" })).toBeVisible();
});
