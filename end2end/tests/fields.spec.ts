// Custom fields: an author defines typed fields, then fills them in on a reader's
// page, where a value of the wrong type is named beside its field and nothing is saved.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, waitForHydration } from "./helpers";

test("define typed fields and fill them in on a reader's page", async ({ page }) => {
  await signUpWithWorkspace(page, uniqueEmail("fielder"), `Fields ${uniqueId()}`);

  await gotoHydrated(page, "/audience/fields");
  await expect(page.getByText("No custom fields yet")).toBeVisible();
  // A choice field: its choices appear once the type is chosen.
  await page.getByLabel("Label").fill("Plan");
  await page.getByLabel("Type").selectOption("choice");
  await page.getByLabel("Choices, one per line").fill("Free\nPro");
  await page.getByRole("button", { name: "Add field" }).click();
  const rows = page.getByTestId("field-row");
  await expect(rows.filter({ hasText: "Plan" })).toContainText("{{ reader.fields.plan }}");
  // A bad key is named beside it.
  await page.getByLabel("Label").fill("Seats");
  await page.getByLabel("Key").fill("Seats!");
  await page.getByLabel("Type").selectOption("number");
  await page.getByRole("button", { name: "Add field" }).click();
  await expect(page.getByText("A key is 1 to 40 lowercase letters")).toBeVisible();
  await page.getByLabel("Key").fill("seats");
  await page.getByRole("button", { name: "Add field" }).click();
  await expect(rows).toHaveCount(2);

  // A reader, and their page.
  const email = uniqueEmail("ada");
  await gotoHydrated(page, "/audience/readers");
  await page.getByLabel("Email", { exact: true }).fill(email);
  await page.getByRole("button", { name: "Add reader" }).click();
  await page.getByRole("link", { name: email }).click();
  await expect(page.getByTestId("reader-email")).toHaveText(email);
  await page.getByLabel("Plan").selectOption("Pro");
  await page.getByLabel("Seats").fill("twelve");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.getByTestId("field-error-seats")).toHaveText("Seats takes a number, like 12 or 3.5.");
  // Refused, nothing typed is lost: the plan chosen stays chosen.
  await expect(page.getByLabel("Plan")).toHaveValue("Pro");
  await page.getByLabel("Seats").fill("12");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.getByTestId("field-error-seats")).toHaveText("");

  // Stored typed, shown again after a reload.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByLabel("Seats")).toHaveValue("12");
  await expect(page.getByLabel("Plan")).toHaveValue("Pro");
});
