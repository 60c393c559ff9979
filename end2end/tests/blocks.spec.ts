// The block editor: a new campaign opens with a starter document of blocks. The
// author edits a heading, adds an image, reorders blocks with the keyboard (Alt+↑/↓) and with
// the mouse (dragging a handle), undoes and redoes, sees a field's problem beside it, previews
// at phone width, sends a test to the dev inbox and sees the image load there; a reload keeps
// every block.
import type { Locator, Page } from "@playwright/test";
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, setUpSender, waitForHydration, gotoHydrated, dropImage, listWithReaders } from "./helpers";

async function kinds(page: Page): Promise<string[]> {
  return page.getByTestId("block").evaluateAll((els) => els.map((e) => e.getAttribute("data-kind") ?? ""));
}

function block(page: Page, kind: string): Locator {
  return page.locator(`[data-testid="block"][data-kind="${kind}"]`);
}

async function saved(page: Page): Promise<void> {
  await expect(page.getByTestId("save-status")).toContainText("Saved at", { timeout: 15_000 });
}

test("build a campaign from blocks: edit, add an image, reorder by keyboard and mouse, undo, preview on a phone, test-send", async ({
  page,
  baseURL,
}) => {
  test.setTimeout(150_000);
  await signUpWithWorkspace(page, uniqueEmail("blocks"), `Blocks ${uniqueId()}`);
  await setUpSender(page);

  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name", { exact: true }).fill("Spring issue");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);

  // --- The starter document: blocks are the default for a new campaign. ---
  await expect(page.getByRole("radio", { name: "Blocks" })).toBeChecked();
  await expect.poll(() => kinds(page)).toEqual(["heading", "paragraph", "button", "footer"]);
  await page.getByLabel("Subject", { exact: true }).fill("Spring is here");
  await block(page, "heading").getByLabel("Heading", { exact: true }).fill("Spring for {{ reader.name | default(\"you\") }}");

  // --- Drag an image file in: it is uploaded to the media library and becomes an image block
  // above the footer, served from Herald's own content-hashed address. ---
  await dropImage(page, page.getByTestId("block-editor"));
  // The editor's own upload list is its last (each image block has one too).
  await expect(page.getByTestId("uploads").last()).toContainText("✓ tulips.png (320 × 160)", { timeout: 20_000 });
  await expect.poll(() => kinds(page)).toEqual(["heading", "paragraph", "button", "image", "footer"]);
  const image = block(page, "image");
  await expect(image.getByLabel("Image address", { exact: true })).toHaveValue(
    new RegExp(`^${baseURL}/media/[0-9a-f-]{36}/[0-9a-f]{64}\\.png$`),
  );
  // Without a description it is not saved: the field says why.
  await expect(image.getByText("Write the image description")).toBeVisible({ timeout: 15_000 });
  await image.getByLabel("Description (alt text)", { exact: true }).fill("A field of tulips");
  await image.getByLabel("Width (px)", { exact: true }).fill("300");

  // --- Keyboard: Alt+↑ twice from inside the image block moves it above the paragraph. ---
  await image.getByLabel("Description (alt text)", { exact: true }).focus();
  await page.keyboard.press("Alt+ArrowUp");
  await expect.poll(() => kinds(page)).toEqual(["heading", "paragraph", "image", "button", "footer"]);
  await page.keyboard.press("Alt+ArrowUp");
  await expect.poll(() => kinds(page)).toEqual(["heading", "image", "paragraph", "button", "footer"]);
  // The moved block keeps its content (its inputs were moved, not rebuilt).
  await expect(block(page, "image").getByLabel("Description (alt text)", { exact: true })).toHaveValue("A field of tulips");

  // --- Mouse: drag the button's handle onto the heading. ---
  await block(page, "button")
    .getByRole("button", { name: /Move the button block: drag it/ })
    .dragTo(block(page, "heading"));
  await expect.poll(() => kinds(page)).toEqual(["button", "heading", "image", "paragraph", "footer"]);

  // --- Undo puts the button back; redo moves it again. ---
  await page.getByRole("button", { name: "Undo", exact: true }).click();
  await expect.poll(() => kinds(page)).toEqual(["heading", "image", "paragraph", "button", "footer"]);
  await page.getByRole("button", { name: "Redo", exact: true }).click();
  await expect.poll(() => kinds(page)).toEqual(["button", "heading", "image", "paragraph", "footer"]);
  await page.getByRole("button", { name: "Undo", exact: true }).click();

  // --- Duplicate and delete. ---
  await block(page, "paragraph").getByRole("button", { name: "Duplicate" }).click();
  await expect(block(page, "paragraph")).toHaveCount(2);
  await block(page, "paragraph").nth(1).getByRole("button", { name: "Delete" }).click();
  await expect(block(page, "paragraph")).toHaveCount(1);

  // --- A problem is shown beside its field, and goes once fixed. ---
  const link = block(page, "button").getByLabel("Link", { exact: true });
  await link.fill("example.com/spring");
  await expect(block(page, "button").getByText("Give the button a full link")).toBeVisible({ timeout: 15_000 });
  await link.fill("https://example.com/spring");
  await saved(page);
  await expect(block(page, "button").getByText("Give the button a full link")).toBeHidden();

  // --- The preview shows the blocks, at desktop width and at a phone's 390 px. ---
  const frame = page.frameLocator('[data-testid="preview-frame"]');
  await expect(frame.getByRole("heading", { name: "Spring for Sample Reader" })).toBeVisible({ timeout: 15_000 });
  await expect(frame.getByRole("img", { name: "A field of tulips" })).toBeVisible();
  await expect(frame.getByRole("link", { name: "Read more" })).toHaveAttribute("href", /example\.com\/spring/);
  await page.getByRole("button", { name: "Phone", exact: true }).click();
  const phone = page.getByTestId("preview-frame");
  await expect(phone).toHaveAttribute("data-width", "phone");
  expect(Math.round((await phone.boundingBox())?.width ?? 0)).toBe(390);
  await page.getByRole("button", { name: "Desktop", exact: true }).click();
  // The desktop view lays the mail out at a desktop client's width (scaled into the column),
  // not at the column's phone-like 400-odd pixels.
  await expect(page.getByTestId("preview-frame")).toHaveAttribute("data-width", "desktop");
  await expect.poll(() => page.getByTestId("preview-frame").evaluate((el) => (el as HTMLElement).clientWidth)).toBeGreaterThanOrEqual(700);
  expect((await page.getByTestId("preview-frame").boundingBox())?.width ?? 0).toBeGreaterThan(400);
  // Sending, scheduling and a test are in view beside the content, without scrolling.
  for (const name of ["Send now", "Schedule…", "Send test"]) {
    await expect(page.getByRole("button", { name, exact: true })).toBeInViewport();
  }

  // --- A reload keeps every block, in order. ---
  await page.reload();
  await waitForHydration(page);
  await expect.poll(() => kinds(page)).toEqual(["heading", "image", "paragraph", "button", "footer"]);
  await expect(block(page, "heading").getByLabel("Heading", { exact: true })).toHaveValue('Spring for {{ reader.name | default("you") }}');

  // --- A test send reaches the dev inbox, where the image loads. ---
  const tester = uniqueEmail("blocks-tester");
  await page.getByLabel("Send a test to", { exact: true }).fill(tester);
  await page.getByRole("button", { name: "Send test" }).click();
  await expect(page.getByTestId("test-result")).toContainText("accepted", { timeout: 20_000 });
  await page.goto("/dev/inbox");
  await page.getByRole("link", { name: /\[Test\] Spring is here/ }).first().click();
  const mail = page.frameLocator('[data-testid="html-part"]');
  const img = mail.getByRole("img", { name: "A field of tulips" });
  await expect(img).toBeVisible({ timeout: 15_000 });
  await expect(img).toHaveAttribute("width", "300");
  await expect(img).toHaveAttribute("src", new RegExp(`^${baseURL}/media/`));
  await expect.poll(() => img.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBeGreaterThan(0);
  await expect(mail.getByRole("heading", { name: "Spring for Sample Reader" })).toBeVisible();
});

test("switching an untouched starter to Markdown asks nothing; edited blocks ask first", async ({ page }) => {
  await signUpWithWorkspace(page, uniqueEmail("blocks-switch"), `Switch ${uniqueId()}`);
  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name", { exact: true }).fill("Switcher");
  await page.getByRole("button", { name: "New campaign" }).click();
  await waitForHydration(page);
  // Edited: a dismissed confirmation keeps the blocks.
  await block(page, "paragraph").getByLabel("Text", { exact: true }).fill("Kept as written.");
  page.once("dialog", (d) => d.dismiss());
  // `click`, not `check`: the radio is meant to stay unchecked.
  await page.getByRole("radio", { name: "Markdown" }).click();
  await expect(page.getByRole("radio", { name: "Blocks" })).toBeChecked();
  await expect(page.getByTestId("block-editor")).toBeVisible();
  // Accepted: the blocks become Markdown.
  page.once("dialog", (d) => d.accept());
  await page.getByRole("radio", { name: "Markdown" }).check();
  await expect(page.getByLabel("Body", { exact: true })).toHaveValue(/Kept as written\./);
  await expect(page.getByLabel("Body", { exact: true })).toHaveValue(/\[Read more\]\(https:\/\/example\.com\)/);
  // And back: the Markdown becomes one paragraph block.
  await page.getByRole("radio", { name: "Blocks" }).check();
  await expect.poll(() => kinds(page)).toEqual(["paragraph"]);
  await expect(page.getByTestId("save-status")).toContainText("Saved at", { timeout: 15_000 });
});

test("a merge-tag mistake names its block in the preview, the test send and the send panel, and the block is marked", async ({
  page,
}) => {
  test.setTimeout(120_000);
  await signUpWithWorkspace(page, uniqueEmail("blockerr"), `Block errors ${uniqueId()}`);
  await setUpSender(page);
  await listWithReaders(page, "Weekly", [uniqueEmail("blockerr-reader")]);
  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name", { exact: true }).fill("Broken tag");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  await page.getByLabel("Subject", { exact: true }).fill("Hello");
  const paragraph = block(page, "paragraph");
  await paragraph.getByLabel("Text", { exact: true }).fill("Hi {{ reader.name | nosuchfilter }}, welcome.");
  await saved(page);

  // The preview names the second block, the paragraph — not a line and column of the HTML.
  const error = page.getByTestId("template-error");
  await expect(error).toContainText("block 2 (Paragraph)", { timeout: 15_000 });
  await expect(error).toContainText("nosuchfilter");
  await expect(error).not.toContainText("line");
  // The block is marked in the editor, with the message beside its text.
  await expect(paragraph).toHaveAttribute("data-template-error", "true");
  await expect(paragraph.getByText("The template has an error here")).toBeVisible();
  await expect(block(page, "heading")).not.toHaveAttribute("data-template-error", "true");

  // The test send says the same.
  await page.getByRole("button", { name: "Send test" }).click();
  await expect(page.getByRole("alert").filter({ hasText: "block 2 (Paragraph)" }).first()).toBeVisible({ timeout: 15_000 });

  // And so does the send.
  await page.getByRole("tab", { name: "Settings" }).click();
  await page.getByTestId("campaign-lists").getByLabel("Weekly").check();
  await saved(page);
  await page.getByRole("button", { name: "Send now" }).click();
  await page.getByRole("dialog", { name: "Send this campaign now?" }).getByRole("button", { name: "Send now" }).click();
  await expect(page.getByText("Fix the template first: body, block 2 (Paragraph)")).toBeVisible({ timeout: 15_000 });
  await expect(page.getByTestId("campaign-status")).toHaveCount(0);

  // Fixed, the mark goes and the preview shows the mail.
  await page.getByRole("tab", { name: "Content" }).click();
  await paragraph.getByLabel("Text", { exact: true }).fill("Hi {{ reader.name }}, welcome.");
  await saved(page);
  await expect(page.frameLocator('[data-testid="preview-frame"]').getByText("Hi Sample Reader, welcome.")).toBeVisible({ timeout: 15_000 });
  await expect(paragraph).not.toHaveAttribute("data-template-error", "true");

  // On a phone the block's toolbar wraps as one group: "Delete" never sits alone on a line.
  await page.setViewportSize({ width: 390, height: 844 });
  const duplicate = await paragraph.getByRole("button", { name: "Duplicate" }).boundingBox();
  const remove = await paragraph.getByRole("button", { name: "Delete" }).boundingBox();
  const up = await paragraph.getByRole("button", { name: "Move the paragraph block up" }).boundingBox();
  expect(Math.round(remove?.y ?? -1)).toBe(Math.round(duplicate?.y ?? -2));
  expect(Math.round(remove?.y ?? -1)).toBe(Math.round(up?.y ?? -2));
});
