// An author imports a CSV with a bad row onto a list, from a reloaded mapping page where they
// make a typed field for a column, watches the progress reach 100 % and downloads the error
// report.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, waitForHydration } from "./helpers";

test("CSV import with a bad row reaches 100 % and reports the row", async ({ page }) => {
  await signUpWithWorkspace(page, uniqueEmail("importer"), `Imports ${uniqueId()}`);

  // A workspace with a list: the mapping page once failed to hydrate as soon as there was one.
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Imported");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Imported");

  await gotoHydrated(page, "/audience/imports");
  const rows = ["email,name,city"];
  for (let i = 0; i < 250; i++) rows.push(`reader${i}@example.com,Reader ${i},Lyon`);
  rows.push("this is not an email,Broken,Nowhere");
  // The first reader again, renamed: with "Update their name and attributes" (the default) the
  // summary says it updated a reader, not that it skipped a row it in fact applied.
  rows.push("reader0@example.com,Reader Zero,Paris");
  await page.getByLabel("CSV file").setInputFiles({
    name: "readers.csv",
    mimeType: "text/csv",
    buffer: Buffer.from(rows.join("\n") + "\n"),
  });
  await page.getByRole("button", { name: "Upload" }).click();

  // Mapping step: the columns were guessed from the header.
  await expect(page).toHaveURL(/\/audience\/imports\/[0-9a-f-]+$/);
  await expect(page.getByTestId("import-preview")).toContainText("reader0@example.com");
  await expect(page.getByLabel("Column email")).toHaveValue("email");
  await expect(page.getByLabel("Column city")).toHaveValue("attributes.city");
  // Loaded directly (a reload), the page still works. It will not start into no list unless
  // that is chosen on purpose (48 of 51 readers once went nowhere, silently).
  await gotoHydrated(page, page.url());
  // A typed field made beside the mapping is offered in every column's choices at once.
  await page.getByLabel("Label").fill("Town");
  await page.getByRole("button", { name: "Add field" }).click();
  await page.getByLabel("Column city").selectOption({ label: "Field: Town" });
  await expect(page.getByLabel("Column city")).toHaveValue("attributes.town");
  const startButton = page.getByRole("button", { name: "Start import" });
  await expect(startButton).toBeDisabled();
  await expect(page.getByTestId("import-lists-hint")).toBeVisible();
  await page.getByRole("checkbox", { name: /Add them to no list/ }).check();
  await expect(startButton).toBeEnabled();
  await page.getByRole("checkbox", { name: /Add them to no list/ }).uncheck();
  await expect(startButton).toBeDisabled();
  // Choose the list, start.
  await page.getByRole("checkbox", { name: "Imported" }).check();
  await expect(page.getByTestId("import-lists-hint")).toBeHidden();
  await page.getByRole("button", { name: "Start import" }).click();

  // Progress, live.
  await expect(page.getByTestId("import-percent")).toHaveText("100%", { timeout: 30_000 });
  await expect(page.getByTestId("import-status")).toHaveText("done");
  await expect(page.getByTestId("rows-created")).toHaveText("250");
  await expect(page.getByTestId("rows-invalid")).toHaveText("1");
  await expect(page.getByTestId("rows-updated")).toHaveText("1");
  await expect(page.getByTestId("rows-skipped")).toHaveText("0");

  // The report survives a reload, and names the bad row.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByTestId("import-percent")).toHaveText("100%");
  const download = page.waitForEvent("download");
  await page.getByRole("link", { name: "Download the error report" }).click();
  const file = await download;
  const stream = await file.createReadStream();
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  const report = Buffer.concat(chunks).toString("utf8");
  expect(report).toContain("line,reason,row");
  expect(report).toMatch(/^252,.*not a valid email/m);

  await page.getByRole("link", { name: "See the readers" }).click();
  await expect(page.getByTestId("readers-table")).toContainText("reader249@example.com");
  await gotoHydrated(page, "/audience");
  await expect(page.getByTestId("lists-table").getByRole("row", { name: /Imported/ }).getByTestId("confirmed-count")).toHaveText("250");
});

// A first author's stumbles: a file with nobody's address was accepted and shown as garbage
// until Start; `first_name` became an attribute; a refused Start cleared the ticked lists.
test("the import refuses a file without addresses, guesses names and keeps choices after a refused start", async ({ page }) => {
  const warnings: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "warning") warnings.push(m.text());
  });
  await signUpWithWorkspace(page, uniqueEmail("importer2"), `Import choices ${uniqueId()}`);
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Kept");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Kept");

  // No column of addresses: refused at upload, said beside the file field, nothing kept.
  await gotoHydrated(page, "/audience/imports");
  await page.getByLabel("CSV file").setInputFiles({
    name: "no-address.csv",
    mimeType: "text/csv",
    buffer: Buffer.from("Name,City\nAda,Lyon\n"),
  });
  await page.getByRole("button", { name: "Upload" }).click();
  await expect(page.getByTestId("upload-error")).toContainText("No column of this file holds email addresses");
  await expect(page.getByLabel("CSV file")).toHaveAttribute("aria-invalid", "true");
  await expect(page.getByText("No imports yet.")).toBeVisible();

  // First and last names are guessed as the reader's name.
  await waitForHydration(page);
  await page.getByLabel("CSV file").setInputFiles({
    name: "people.csv",
    mimeType: "text/csv",
    buffer: Buffer.from("First Name,Last Name,E-mail,Plan\nAda,Lovelace,ada@example.com,pro\n"),
  });
  await page.getByRole("button", { name: "Upload" }).click();
  await expect(page).toHaveURL(/\/audience\/imports\/[0-9a-f-]+$/);
  await waitForHydration(page);
  await expect(page.getByLabel("Column First Name")).toHaveValue("first_name");
  await expect(page.getByLabel("Column Last Name")).toHaveValue("last_name");
  await expect(page.getByLabel("Column E-mail")).toHaveValue("email");
  await expect(page.getByLabel("Column Plan")).toHaveValue("attributes.plan");

  // A refused start keeps every choice beside its reason.
  await page.getByRole("checkbox", { name: "Kept" }).check();
  await page.getByLabel("Column Plan").selectOption("email");
  await page.getByRole("button", { name: "Start import" }).click();
  await expect(page.getByRole("alert").filter({ hasText: "Map exactly one column to Email" })).toBeVisible();
  await expect(page.getByRole("checkbox", { name: "Kept" })).toBeChecked();
  await expect(page.getByLabel("Column Plan")).toHaveValue("email");
  await expect(page.getByLabel("Column First Name")).toHaveValue("first_name");

  await page.getByLabel("Column Plan").selectOption({ label: "Text: plan" });
  await page.getByRole("button", { name: "Start import" }).click();
  await expect(page.getByTestId("import-status")).toHaveText("done", { timeout: 30_000 });
  // The progress polled without a console warning (it once logged one every second).
  expect(warnings).toEqual([]);
  await page.getByRole("link", { name: "See the readers" }).click();
  await expect(page.getByTestId("readers-table")).toContainText("Ada Lovelace");
});
