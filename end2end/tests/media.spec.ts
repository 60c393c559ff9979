// The media library page: upload images with the file picker and by dropping them,
// see each with its size and permanent address, a refused file with the reason, the storage
// used, and delete one after a confirmation; the image's address stops answering.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, dropImage } from "./helpers";

test("upload, list and delete images in the media library", async ({ page }) => {
  await signUpWithWorkspace(page, uniqueEmail("media"), `Media ${uniqueId()}`);
  await gotoHydrated(page, "/media");
  await expect(page.getByText("No images yet")).toBeVisible();

  // The file picker: one image, and one file that is not an image.
  await page.getByLabel("Upload images").setInputFiles([
    { name: "tulips.png", mimeType: "image/png", buffer: readFileSync(join(__dirname, "../fixtures/tulips.png")) },
    { name: "notes.png", mimeType: "image/png", buffer: Buffer.from("not an image at all") },
  ]);
  const uploads = page.getByTestId("uploads");
  await expect(uploads).toContainText("✓ tulips.png (320 × 160)", { timeout: 20_000 });
  await expect(uploads).toContainText("✗ notes.png: Upload a PNG, JPEG, GIF or WebP image");
  const items = page.getByTestId("media-item");
  await expect(items).toHaveCount(1);
  await expect(items.first()).toContainText("320 × 160");
  await expect(page.getByTestId("media-usage")).toContainText("of 100.0 MB used");

  // Dropping a file on the page uploads it too (a second name, the same picture: stored once).
  await dropImage(page, page.getByTestId("media-drop"), "again.png");
  await expect(uploads).toContainText("✓ tulips.png (320 × 160)");
  await expect(items).toHaveCount(1);

  // Its address serves the image to anyone, immutably.
  const address = await items.first().getByRole("textbox").inputValue();
  expect(address).toMatch(/\/media\/[0-9a-f-]{36}\/[0-9a-f]{64}\.png$/);
  const served = await page.request.get(address);
  expect(served.status()).toBe(200);
  expect(served.headers()["content-type"]).toBe("image/png");
  expect(served.headers()["cache-control"]).toContain("immutable");
  await expect
    .poll(() => items.first().locator("img").evaluate((el) => (el as HTMLImageElement).naturalWidth))
    .toBe(320);

  // Delete, after a confirmation that says what it breaks.
  await items.first().getByRole("button", { name: "Delete" }).click();
  const dialog = page.getByRole("dialog", { name: "Delete tulips.png?" });
  await expect(dialog).toContainText("also in mail already sent");
  await dialog.getByRole("button", { name: "Delete image" }).click();
  await expect(page.getByText("No images yet")).toBeVisible();
  expect((await page.request.get(address)).status()).toBe(404);
});
