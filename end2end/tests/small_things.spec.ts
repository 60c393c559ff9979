// Small things that add up: the workspace address suggestion is said in words, not
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

// Content first: the campaign page was one long form with the body last, and the
// preview scrolled away while the author typed. Now the message and its content are the first
// view, with the preview beside the text being written; the settings are a view of their own
// (kept in the address, so a reload opens it again); on a phone the preview is a third view.
test("the campaign page puts the content first, with the preview in view while typing", async ({ page }) => {
  test.setTimeout(90_000);
  await page.setViewportSize({ width: 1280, height: 900 });
  await signUpWithWorkspace(page, uniqueEmail("content-first"), `Content ${uniqueId()}`);
  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name").fill("Content first");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  const path = new URL(page.url()).pathname;

  const heading = (name: string) => page.getByRole("heading", { level: 2, name, exact: true });
  await expect(page.getByRole("tab", { name: "Content" })).toHaveAttribute("aria-selected", "true");
  await expect(heading("Message")).toBeVisible();
  await expect(heading("Content")).toBeVisible();
  // The settings are out of the way until asked for.
  await expect(heading("Sender")).toBeHidden();
  await expect(heading("Audience")).toBeHidden();
  // The body is on the first screen, not 2,500 px down.
  expect((await heading("Content").boundingBox())!.y).toBeLessThan(900);

  // Typing in the last block leaves the preview in view.
  const paragraph = page.getByTestId("block-editor").getByRole("textbox").last();
  await paragraph.scrollIntoViewIfNeeded();
  await paragraph.fill("Typed while the preview watches");
  const frame = await page.getByTestId("preview-frame").boundingBox();
  expect(frame, "the preview is on the page").not.toBeNull();
  expect(frame!.y, "the preview's top is on screen").toBeLessThan(900);
  expect(frame!.y + frame!.height, "the preview is not scrolled away above").toBeGreaterThan(0);

  // The settings: their own view, with the preview and the send button still beside them.
  await page.getByRole("tab", { name: "Settings" }).click();
  await expect(heading("Sender")).toBeVisible();
  await expect(heading("Audience")).toBeVisible();
  await expect(heading("Content")).toBeHidden();
  await expect(page.getByRole("button", { name: "Send now" })).toBeVisible();
  await expect(page).toHaveURL(`${path}?tab=settings`);
  // A problem in a setting found while the content is in view marks the Settings tab.
  await page.getByLabel("From email").fill("not an address");
  await page.getByRole("tab", { name: "Content" }).click();
  await expect(page.getByTestId("settings-problems")).toHaveText("1 problem", { timeout: 15_000 });
  // The tabs work from the keyboard: the arrow keys move between them.
  await page.getByRole("tab", { name: /Content/ }).focus();
  await page.keyboard.press("ArrowRight");
  await expect(page.getByRole("tab", { name: /Settings/ })).toBeFocused();
  await expect(page.getByRole("tab", { name: /Settings/ })).toHaveAttribute("aria-selected", "true");
  await page.getByLabel("From email").fill("");
  await expect(page.getByTestId("settings-problems")).toHaveCount(0, { timeout: 15_000 });
  // A reload keeps the view.
  await gotoHydrated(page, `${path}?tab=settings`);
  await expect(page.getByRole("tab", { name: "Settings" })).toHaveAttribute("aria-selected", "true");
  await expect(heading("Sender")).toBeVisible();

  // On a phone the preview, the test and the send button are a view of their own.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole("tab", { name: "Content" }).click();
  await expect(page.getByLabel("Subject", { exact: true })).toBeVisible();
  await expect(page.getByTestId("preview-frame")).toBeHidden();
  await page.getByRole("tab", { name: "Preview & send" }).click();
  await expect(page.getByTestId("preview-frame")).toBeVisible();
  await expect(page.getByRole("button", { name: "Send now" })).toBeVisible();
  await expect(page.getByLabel("Subject", { exact: true })).toBeHidden();

  // This draft was made before the workspace had a default sender: setting one fills it in
  // (it would otherwise stay stuck at "Choose a sender address first").
  await page.setViewportSize({ width: 1280, height: 900 });
  await gotoHydrated(page, "/settings");
  await page.getByLabel("Default sender email").fill("letters@example.com");
  await page.getByRole("button", { name: "Save changes" }).click();
  await expect(page.getByText("Saved", { exact: true })).toBeVisible();
  await gotoHydrated(page, `${path}?tab=settings`);
  await expect(page.getByLabel("From email")).toHaveValue("letters@example.com");
});

// A form reset after a successful create: the Add reader form empties for the next
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

  // So does creating a list: its required Name, emptied for the next list, is not red.
  await gotoHydrated(page, "/audience");
  const name = page.getByLabel("Name", { exact: true });
  await name.fill("Reset list");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Reset list");
  await expect(page.getByLabel("Name", { exact: true })).toHaveValue("");
  await expect(page.locator("#list-name:user-invalid")).toHaveCount(0);
});

// Dates in the author's own way of writing them: a German author in Berlin reads
// 28.11.2026, 08:10, not 2026-11-28 07:10 in UTC. The server knows neither; the browser rewrites
// each date after hydration, and the exact instant stays in `datetime`.
test.describe("dates in the author's locale", () => {
  test.use({ locale: "de-DE", timezoneId: "Europe/Berlin" });

  test("the campaign list and the members page write dates as the browser's locale does", async ({ page }) => {
    test.setTimeout(60_000);
    await signUpWithWorkspace(page, uniqueEmail("locale"), `Datum ${uniqueId()}`);
    await gotoHydrated(page, "/campaigns");
    await page.getByLabel("Campaign name").fill("Dezember");
    await page.getByRole("button", { name: "New campaign" }).click();
    await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);

    const german = (iso: string) =>
      new Intl.DateTimeFormat("de-DE", { dateStyle: "medium", timeStyle: "short", timeZone: "Europe/Berlin" }).format(new Date(iso));
    for (const path of ["/campaigns", "/settings/members"]) {
      await gotoHydrated(page, path);
      const time = page.getByTestId("local-time").first();
      const iso = await time.getAttribute("datetime");
      expect(iso, `${path} marks the instant`).toBeTruthy();
      await expect(time, `${path} writes it the German way, in Berlin's time`).toHaveText(german(iso!));
      await expect(time).toHaveText(/^\d{2}\.\d{2}\.\d{4}, \d{2}:\d{2}$/);
    }
  });
});
