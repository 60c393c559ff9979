// The dashboard: the getting-started checklist names what still blocks a first send
// and goes away once nothing does; the audience in numbers, with its growth over 30 or 90 days
// (the choice in the address, kept on reload).
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, setUpSender, listWithReaders, waitForHydration } from "./helpers";

test("the checklist names the blockers, then leaves; the audience shows in numbers", async ({ page }) => {
  test.setTimeout(120_000);
  await signUpWithWorkspace(page, uniqueEmail("dash"), `Dashboard ${uniqueId()}`);
  await gotoHydrated(page, "/");
  const checklist = page.getByTestId("checklist");
  await expect(checklist).toContainText("Verify a sending domain");
  await expect(checklist).toContainText("Add your postal address");
  await expect(checklist).toContainText("Make a first list");
  await expect(page.getByTestId("readers-count")).toHaveText("0");
  await expect(page.getByTestId("growth-empty")).toBeVisible();

  // Sender, address and domain done: one blocker left, the list.
  await setUpSender(page);
  await gotoHydrated(page, "/");
  await expect(page.getByTestId("checklist-progress")).toHaveText("3 of 4 done");
  await expect(checklist.locator("li[data-done=false]")).toHaveCount(1);
  await expect(checklist.locator("li[data-done=false]")).toContainText("Make a first list");

  // A list with two readers: nothing blocks a send, so the checklist is gone.
  await listWithReaders(page, "Friends", [uniqueEmail("d1"), uniqueEmail("d2")]);
  await gotoHydrated(page, "/");
  await expect(page.getByTestId("checklist")).toHaveCount(0);
  await expect(page.getByTestId("readers-count")).toHaveText("2");
  await expect(page.getByTestId("confirmed-subscriptions")).toHaveText("2");
  await expect(page.getByTestId("net-growth")).toHaveText("+2");
  await expect(page.getByTestId("chart-growth")).toHaveAttribute("data-chart-ready", "true", { timeout: 20_000 });

  // The 30-day window, in the address, survives a reload.
  await page.getByRole("link", { name: "30 days" }).click();
  await expect(page).toHaveURL(/\?days=30$/);
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByRole("link", { name: "30 days" })).toHaveAttribute("aria-current", "page");
  await expect(page.getByText("Net growth, 30 days")).toBeVisible();
  // Every day of the window is on the chart, quiet ones as zero (not only the one day with
  // subscriptions, which would be a lone dot).
  const growth = JSON.parse((await page.getByTestId("chart-growth").getAttribute("data-chart"))!);
  const days = (Array.isArray(growth.xAxis) ? growth.xAxis[0] : growth.xAxis).data as string[];
  expect(days).toHaveLength(30);
  expect(growth.series[0].data.reduce((a: number, b: number) => a + b, 0)).toBe(2);
});
