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

// Content first (issue 35): the campaign page was one long form with the body last, and the
// preview scrolled away while the author typed. Now the message and its content lead, the
// settings follow under their own heading, and the preview stays beside the text being written.
test("the campaign page puts the content first, with the preview in view while typing", async ({ page }) => {
  test.setTimeout(90_000);
  await page.setViewportSize({ width: 1280, height: 900 });
  await signUpWithWorkspace(page, uniqueEmail("content-first"), `Content ${uniqueId()}`);
  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name").fill("Content first");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);

  const top = async (name: string) => (await page.getByRole("heading", { level: 2, name, exact: true }).boundingBox())?.y ?? -1;
  const [message, content, settings, sender, audience] = await Promise.all(
    ["Message", "Content", "Settings", "Sender", "Audience"].map(top),
  );
  expect(message).toBeGreaterThan(0);
  expect(content, "the content follows the subject").toBeGreaterThan(message);
  expect(settings, "the settings come after the content").toBeGreaterThan(content);
  expect(sender).toBeGreaterThan(settings);
  expect(audience).toBeGreaterThan(settings);
  // The body is on the first screen, not 2,500 px down.
  expect(content).toBeLessThan(900);

  // Typing in the last block leaves the preview in view.
  const paragraph = page.getByTestId("block-editor").getByRole("textbox").last();
  await paragraph.scrollIntoViewIfNeeded();
  await paragraph.fill("Typed while the preview watches");
  const frame = await page.getByTestId("preview-frame").boundingBox();
  expect(frame, "the preview is on the page").not.toBeNull();
  expect(frame!.y, "the preview's top is on screen").toBeLessThan(900);
  expect(frame!.y + frame!.height, "the preview is not scrolled away above").toBeGreaterThan(0);
});

// A form reset after a successful create (issue 35): the Add reader form empties for the next
// reader, and its required Email field, touched and now empty, is not outlined red as invalid.
test("adding a reader resets the form without marking it invalid", async ({ page }) => {
  test.setTimeout(60_000);
  await signUpWithWorkspace(page, uniqueEmail("reset"), `Reset ${uniqueId()}`);
  await gotoHydrated(page, "/audience/readers");
  const email = page.getByLabel("Email", { exact: true });
  const added = uniqueEmail("added");
  await email.fill(added);
  await page.getByRole("button", { name: "Add reader" }).click();
  await expect(page.getByTestId("readers-table")).toContainText(added);
  await expect(email).toHaveValue("");
  await expect(page.locator("#new-email:user-invalid")).toHaveCount(0);
  const border = await email.evaluate((el) => getComputedStyle(el).borderColor);
  expect(border, "a neutral border, not the invalid red").not.toMatch(/rgb\((2[0-9]{2}), ([0-9]{1,2}|1[0-4][0-9]), /);
});
