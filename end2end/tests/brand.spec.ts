// Brand, layouts and saved templates: the author uploads a logo and picks a colour
// and font on the brand page, sees the newsletter layout in them, starts a campaign from the
// announcement layout (logo, colour and footer text already there), restyles it in the block
// editor, saves it as a template and starts the next campaign from that template.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, waitForHydration, gotoHydrated } from "./helpers";
import path from "node:path";

test("brand a workspace, start from a layout, save a template and start again from it", async ({ page }) => {
  test.setTimeout(120_000);
  await signUpWithWorkspace(page, uniqueEmail("brand"), `Brand ${uniqueId()}`);

  // --- The brand page: a logo uploaded from disk, an accent colour, a serif font, footer text. ---
  await gotoHydrated(page, "/settings/brand");
  await page.getByLabel("Upload a logo").setInputFiles(path.join(__dirname, "..", "fixtures", "tulips.png"));
  await expect(page.getByLabel("Logo address", { exact: true })).toHaveValue(/\/media\/[0-9a-f-]{36}\/[0-9a-f]{64}\.png$/, {
    timeout: 20_000,
  });
  await expect(page.getByAltText("The current logo")).toBeVisible();
  // A mistake is shown beside its field and nothing is saved.
  await page.getByLabel("Logo width (px)").fill("5");
  await page.getByRole("button", { name: "Save brand" }).click();
  await expect(page.getByText("Choose a width between 16 and 600 pixels.")).toBeVisible();
  await page.getByLabel("Logo width (px)").fill("120");
  await page.getByLabel("Links and buttons (hex)").fill("#be123c");
  await page.getByLabel("Font").selectOption("serif");
  await page.getByLabel("Footer text").fill("Tulip Weekly: notes for people who grow things.");
  await page.getByRole("button", { name: "Save brand" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Saved" })).toBeVisible();
  // The preview is the newsletter layout in the saved brand.
  const preview = page.frameLocator('[data-testid="brand-preview"]');
  await expect(preview.locator("body")).toContainText("Tulip Weekly: notes for people who grow things.");
  await expect(preview.locator("img").first()).toHaveAttribute("src", /\/media\//);
  expect(await page.getByTestId("brand-preview").getAttribute("srcdoc")).toContain("#be123c");
  // It survives a reload.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByLabel("Links and buttons (hex)")).toHaveValue("#be123c");
  await expect(page.getByLabel("Font")).toHaveValue("serif");
  // The preview follows an edit before it is saved; leaving without saving keeps the saved brand.
  await page.getByLabel("Links and buttons (hex)").fill("#1d4ed8");
  await page.getByLabel("Footer text").fill("Draft footer, not saved yet.");
  await expect(preview.locator("body")).toContainText("Draft footer, not saved yet.", { timeout: 15_000 });
  expect(await page.getByTestId("brand-preview").getAttribute("srcdoc")).toContain("#1d4ed8");
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByLabel("Links and buttons (hex)")).toHaveValue("#be123c");
  await expect(preview.locator("body")).toContainText("Tulip Weekly: notes for people who grow things.");

  // --- Start from the announcement layout: the campaign already wears the brand. ---
  await gotoHydrated(page, "/campaigns");
  await page.getByRole("link", { name: "Start from a template" }).click();
  await expect(page).toHaveURL(/\/campaigns\/templates$/);
  await waitForHydration(page);
  await expect(page.getByTestId("layouts").getByRole("listitem")).toHaveCount(3);
  await expect(page.getByText("No templates yet")).toBeVisible();
  await page.getByRole("button", { name: "Start a campaign from the Announcement layout" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  const kinds = () => page.getByTestId("block").evaluateAll((els) => els.map((e) => e.getAttribute("data-kind") ?? ""));
  await expect.poll(kinds).toEqual(["image", "spacer", "heading", "paragraph", "button", "spacer", "footer"]);
  await expect(page.locator('[data-testid="block"][data-kind="footer"]').getByRole("textbox", { name: "Footer text" })).toHaveValue(/^Tulip Weekly/);

  // --- Restyle this one campaign: the style panel's colour reaches the preview. ---
  await page.getByTestId("block-style").locator("summary").click();
  await expect(page.getByLabel("Links and buttons", { exact: true })).toHaveValue("#be123c");
  await page.getByLabel("Links and buttons", { exact: true }).fill("#047857");
  await page.getByLabel("Subject", { exact: true }).fill("Our spring sale");
  await expect(page.getByTestId("save-status")).toContainText("Saved at", { timeout: 15_000 });
  await expect
    .poll(async () => (await page.getByTestId("preview-frame").getAttribute("srcdoc")) ?? "", { timeout: 15_000 })
    .toContain("#047857");
  // "Use the workspace's brand colours" brings it back.
  await page.getByRole("button", { name: "Use the workspace’s brand colours" }).click();
  await expect(page.getByLabel("Links and buttons", { exact: true })).toHaveValue("#be123c");

  // --- Save as a template, then start the next campaign from it. ---
  await page.getByLabel("Template name").fill("Spring sale");
  await page.getByRole("button", { name: "Save as template" }).click();
  await expect(page.getByText("Saved. It is under “Your templates”")).toBeVisible();
  await page.getByRole("link", { name: "Templates", exact: true }).click();
  await expect(page).toHaveURL(/\/campaigns\/templates$/);
  await waitForHydration(page);
  const saved = page.getByTestId("saved-templates");
  await expect(saved).toContainText("Spring sale");
  await expect(saved).toContainText("Our spring sale");
  await saved.getByRole("button", { name: "Start a campaign from Spring sale" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  await expect(page.getByLabel("Subject", { exact: true })).toHaveValue("Our spring sale");
  await expect.poll(kinds).toEqual(["image", "spacer", "heading", "paragraph", "button", "spacer", "footer"]);

  // --- Delete the template: asked first; the campaign made from it stays. ---
  await gotoHydrated(page, "/campaigns/templates");
  await page.getByRole("button", { name: "Delete Spring sale" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete template" }).click();
  await expect(page.getByText("No templates yet")).toBeVisible();
});

// The readers' pages are the author's: after saving a brand, the hosted subscribe page still
// showed Herald's own colours and typeface and no logo.
test("a branded workspace's subscribe page wears its colour, font, logo and name", async ({ page }) => {
  const workspace = `Tulip Weekly ${uniqueId()}`;
  await signUpWithWorkspace(page, uniqueEmail("branded"), workspace);
  await gotoHydrated(page, "/settings/brand");
  await page.getByLabel("Upload a logo").setInputFiles(path.join(__dirname, "..", "fixtures", "tulips.png"));
  await expect(page.getByLabel("Logo address", { exact: true })).toHaveValue(/\/media\//, { timeout: 20_000 });
  await page.getByLabel("Links and buttons (hex)").fill("#be123c");
  await page.getByLabel("Font").selectOption("serif");
  await page.getByRole("button", { name: "Save brand" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Saved" })).toBeVisible();

  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Garden notes");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Garden notes");
  const hosted = await page.getByRole("link", { name: /\/s\// }).first().getAttribute("href");
  await page.goto(hosted!);
  const subscribe = page.getByRole("button", { name: "Subscribe" });
  await expect(subscribe).toHaveCSS("background-color", "rgb(190, 18, 60)");
  await expect(page.locator("body")).toHaveCSS("font-family", /Georgia/);
  await expect(page.getByTestId("page-brand")).toContainText(workspace);
  await expect(page.getByTestId("page-brand").getByRole("img", { name: workspace })).toHaveAttribute("src", /\/media\//);
});
