// A campaign's page follows its state on its own. A scheduled campaign once still said
// "Scheduled", with "Send now" and "Cancel schedule", a minute after its mail went out, and an
// edit typed there was dropped without a word when the page flipped to the sent view.
import type { APIRequestContext, Page } from "@playwright/test";
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, setUpSender } from "./helpers";

/** A key for the workspace, made on Settings → API keys. */
async function apiKey(page: Page): Promise<string> {
  await gotoHydrated(page, "/settings/api-keys");
  await page.locator("#key-name").fill(`State ${uniqueId()}`);
  await page.getByRole("button", { name: "Create key" }).click();
  const key = (await page.getByTestId("new-api-key").textContent())?.trim() ?? "";
  expect(key).toMatch(/^hrld_/);
  return key;
}

/** A campaign to two readers, scheduled `seconds` from now through the API; its id. */
async function scheduledCampaign(request: APIRequestContext, key: string, seconds: number): Promise<string> {
  const headers = { Authorization: `Bearer ${key}` };
  const list = await request.post("/api/v1/lists", { headers, data: { name: `Due ${uniqueId()}`, opt_in: "single" } });
  expect(list.status()).toBe(201);
  const listId = (await list.json()).id;
  for (const who of ["one", "two"]) {
    const r = await request.post("/api/v1/readers", { headers, data: { email: uniqueEmail(who), lists: [listId] } });
    expect(r.status()).toBe(201);
  }
  const created = await request.post("/api/v1/campaigns", {
    headers,
    data: { name: "Due soon", subject: "Before the edit", list_ids: [listId], body: "Hello" },
  });
  expect(created.status()).toBe(201);
  const id = (await created.json()).id;
  const at = new Date(Date.now() + seconds * 1000).toISOString();
  const scheduled = await request.post(`/api/v1/campaigns/${id}/schedule`, { headers, data: { at } });
  expect(scheduled.status(), await scheduled.text()).toBe(200);
  return id;
}

test("a scheduled campaign's page turns to sending and sent without a reload", async ({ page, request }) => {
  test.setTimeout(120_000);
  await signUpWithWorkspace(page, uniqueEmail("scheduler"), `Scheduled ${uniqueId()}`);
  await setUpSender(page);
  const key = await apiKey(page);
  const id = await scheduledCampaign(request, key, 6);

  // The console stays clean while the page polls (a resource read outside <Suspense/> once
  // logged a warning on every poll).
  const warnings: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "warning") warnings.push(m.text());
  });
  await gotoHydrated(page, `/campaigns/${id}`);
  await expect(page.getByRole("button", { name: "Cancel schedule" })).toBeVisible();
  // No reload from here on: the page moves by itself.
  await expect(page.getByTestId("campaign-status")).toContainText(/sending|sent/i, { timeout: 45_000 });
  await expect(page.getByRole("button", { name: "Cancel schedule" })).toHaveCount(0);
  await expect(page.getByTestId("campaign-status")).toContainText(/sent/i, { timeout: 45_000 });
  expect(warnings).toEqual([]);
});

test("an edit the send overtook is kept in the form and explained", async ({ page, request }) => {
  test.setTimeout(120_000);
  await signUpWithWorkspace(page, uniqueEmail("late-editor"), `Late edit ${uniqueId()}`);
  await setUpSender(page);
  const key = await apiKey(page);
  const id = await scheduledCampaign(request, key, 8);
  await gotoHydrated(page, `/campaigns/${id}`);
  await expect(page.getByRole("button", { name: "Cancel schedule" })).toBeVisible();

  // The author's save is held on its way until the campaign has started: it arrives too late.
  await page.route("**/rpc/save_campaign**", async (route) => {
    await expect
      .poll(
        async () => {
          const r = await request.get(`/api/v1/campaigns/${id}`, { headers: { Authorization: `Bearer ${key}` } });
          return (await r.json()).status;
        },
        { timeout: 45_000 },
      )
      .not.toBe("scheduled");
    await route.continue();
  });
  const subject = page.getByLabel("Subject", { exact: true });
  await subject.fill("A better subject, typed too late");
  await subject.blur();

  await expect(page.getByTestId("overtaken")).toContainText("started sending while you were editing", { timeout: 60_000 });
  await expect(subject).toHaveValue("A better subject, typed too late");
  await expect(page.getByTestId("save-status")).toContainText("Not saved");
  await page.getByRole("button", { name: "Show its progress" }).click();
  await expect(page.getByTestId("campaign-status")).toContainText(/sending|sent/i);
});
