// Small things that add up (issue 35): the workspace address suggestion is said in words, not
// only as a placeholder; choosing a workspace in the switcher switches (no "Go" button); the
// embed snippet comes with a preview and does not overflow its card.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, waitForHydration } from "./helpers";

test("switching workspaces, the address suggestion, the embed preview", async ({ page }) => {
  test.setTimeout(90_000);
  const first = `First ${uniqueId()}`;
  await signUpWithWorkspace(page, uniqueEmail("small"), first);

  // A second workspace: its address suggestion is written out as the name is typed.
  await gotoHydrated(page, "/workspaces/new");
  const second = `Second Shop ${uniqueId()}`;
  await page.getByLabel("Workspace name").fill(second);
  await expect(page.getByTestId("slug-suggestion")).toContainText(`/s/second-shop-`);
  await page.getByRole("button", { name: "Create workspace" }).click();
  await expect(page.getByRole("heading", { level: 1, name: second })).toBeVisible();

  // Choosing the first in the switcher is enough.
  await waitForHydration(page);
  await expect(page.getByRole("button", { name: "Go" })).toHaveCount(0);
  await page.getByTestId("workspace-switcher").selectOption({ label: first });
  await expect(page.getByRole("heading", { level: 1, name: first })).toBeVisible();

  // A list makes the embed snippet appear, with a preview of the form it makes.
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Embedded");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Embedded");
  const preview = page.frameLocator("[data-testid=embed-preview]");
  await expect(preview.getByRole("button", { name: "Subscribe" })).toBeVisible();
  await expect(preview.getByRole("textbox", { name: "Email" })).toBeVisible();
  const snippet = page.getByTestId("embed-snippet");
  const fits = await snippet.evaluate((el) => el.scrollWidth <= el.clientWidth + 1);
  expect(fits, "the snippet wraps instead of overflowing").toBe(true);
});
