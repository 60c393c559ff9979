// Tags: an author tags a reader on their page and takes a tag off, tags two readers
// at once from the readers list, then renames and deletes tags on the Tags page.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated } from "./helpers";

test("tag readers one by one and in bulk, then rename and delete a tag", async ({ page }) => {
  await signUpWithWorkspace(page, uniqueEmail("tagger"), `Tags ${uniqueId()}`);

  // An empty Tags page says how tags are made.
  await gotoHydrated(page, "/audience/tags");
  await expect(page.getByText("No tags yet")).toBeVisible();

  const readers = [uniqueEmail("ada"), uniqueEmail("grace"), uniqueEmail("linus")];
  await gotoHydrated(page, "/audience/readers");
  for (const email of readers) {
    await page.getByLabel("Email", { exact: true }).fill(email);
    await page.getByRole("button", { name: "Add reader" }).click();
    await expect(page.getByTestId("readers-table")).toContainText(email);
  }

  // One reader's page: two tags at once, then one taken off.
  await page.getByRole("link", { name: readers[0] }).click();
  await expect(page.getByTestId("reader-email")).toHaveText(readers[0]);
  await page.getByLabel("Add tags").fill("VIP, early bird");
  await page.getByRole("button", { name: "Add", exact: true }).click();
  const chips = page.getByTestId("reader-tag");
  await expect(chips).toHaveCount(2);
  await expect(page.getByTestId("reader-tags")).toContainText("VIP");
  await page.getByRole("button", { name: "Remove tag early bird" }).click();
  await expect(chips).toHaveCount(1);
  await expect(chips.first()).toContainText("VIP");

  // Two readers at once from the list.
  await gotoHydrated(page, "/audience/readers");
  await page.getByRole("checkbox", { name: `Select ${readers[1]}` }).check();
  await page.getByRole("checkbox", { name: `Select ${readers[2]}` }).check();
  await page.getByLabel("Action").selectOption("add_tag");
  await page.getByLabel("Tag", { exact: true }).fill("Newsletter fans");
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page.getByText("Done: 2 readers changed.")).toBeVisible();

  // The Tags page counts them; rename one, delete another (after a confirmation).
  await gotoHydrated(page, "/audience/tags");
  const row = (name: string) => page.getByTestId("tag-row").filter({ has: page.getByTestId("tag-name").getByText(name, { exact: true }) });
  await expect(row("Newsletter fans").getByTestId("tag-count")).toHaveText("2 readers");
  await expect(row("early bird").getByTestId("tag-count")).toHaveText("0 readers");
  // Shown as typed: no style capitalises it into "Early bird" (innerText is what is rendered).
  expect(await row("early bird").getByTestId("tag-name").evaluate((el) => (el as HTMLElement).innerText)).toBe("early bird");
  await row("Newsletter fans").getByRole("button", { name: "Rename Newsletter fans" }).click();
  await page.getByLabel("New name").fill("Fans");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(row("Fans").getByTestId("tag-count")).toHaveText("2 readers");
  await row("VIP").getByRole("button", { name: "Delete VIP" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete tag" }).click();
  await expect(page.getByTestId("tag-name")).toHaveText(["early bird", "Fans"]);

  // A count links to the readers with the tag.
  await row("Fans").getByTestId("tag-count").click();
  await expect(page).toHaveURL(/\/audience\/readers\?tag=Fans$/);
  await expect(page.getByTestId("readers-table").getByRole("link")).toHaveText([readers[2], readers[1]]);

  // The reader who had it has no tags left.
  await gotoHydrated(page, "/audience/readers");
  await page.getByRole("link", { name: readers[0] }).click();
  await expect(page.getByTestId("reader-tags")).toContainText("No tags.");
});
