// A/B tests: an author adds version B to a campaign, tests it on half the audience,
// sees the two versions side by side on the campaign page while the rest waits, sends B to the
// rest, and finds in the dev inbox one message per reader: its version for the test share,
// B for everyone else.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, setUpSender, waitForHydration, listWithReaders } from "./helpers";

type Caught = { to: string[]; subject: string };

test("test two subjects on half the audience and send the winner to the rest", async ({ page }) => {
  test.setTimeout(180_000);
  await signUpWithWorkspace(page, uniqueEmail("abtester"), `AB ${uniqueId()}`);
  await setUpSender(page);
  const readers = Array.from({ length: 12 }, (_, i) => uniqueEmail(`ab${i}`));
  await listWithReaders(page, "Weekly", readers);

  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name").fill("Which subject?");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  const campaignPath = new URL(page.url()).pathname;
  await waitForHydration(page);
  await page.getByLabel("Subject", { exact: true }).fill("Subject A");
  await page.getByRole("tab", { name: "Settings" }).click();
  await page.getByTestId("campaign-lists").getByLabel("Weekly").check();
  // The test: an empty version B is refused beside its field; a share of half.
  await page.getByTestId("ab-test-on").check();
  await page.getByLabel("Test share (%)").fill("50");
  await page.getByLabel("Test share (%)").press("Tab");
  await expect(page.getByText("Write version B's subject.")).toBeVisible();
  await page.getByLabel("Version B: subject").fill("Subject B");
  await page.getByLabel("Version B: subject").press("Tab");
  await expect(page.getByText("Write version B's subject.")).toBeHidden();
  // Version C comes and goes.
  await page.getByRole("button", { name: "Add version C" }).click();
  await expect(page.getByLabel("Version C: subject")).toBeVisible();
  await page.getByRole("button", { name: "Remove version C" }).click();
  await expect(page.getByLabel("Version C: subject")).toBeHidden();
  await page.getByLabel("Test share (%)").press("Tab");
  await expect(page.getByTestId("save-status")).toContainText("Saved", { timeout: 15_000 });
  // The test survives a reload.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByLabel("Version B: subject")).toHaveValue("Subject B");
  await expect(page.getByLabel("Test share (%)")).toHaveValue("50");

  // The confirmation counts the readers and describes the split before anything goes.
  await page.getByRole("button", { name: "Send now" }).click();
  const confirmSend = page.getByRole("dialog", { name: "Send this campaign now?" });
  await expect(confirmSend.getByTestId("send-summary")).toContainText("goes to 12 readers");
  await expect(confirmSend.getByTestId("send-split")).toContainText("50 % of them (about 6) get one of versions A and B");
  await confirmSend.getByRole("button", { name: "Send now" }).click();
  // The test share goes out; the rest waits for the winner.
  const results = page.getByTestId("ab-results");
  await expect(results).toBeVisible({ timeout: 30_000 });
  await expect(page.getByTestId("ab-status")).toContainText("wait for the winner", { timeout: 30_000 });
  await expect(page.getByTestId("campaign-status")).toHaveText("Sending");
  await expect(page.getByTestId("ab-row-A")).toBeVisible();
  await expect(page.getByTestId("ab-row-B")).toContainText("Subject B");
  const held = Number(await page.getByTestId("count-held").textContent());
  // Nobody opened anything: no version leads at 0 to 0.
  await expect(page.getByTestId("ab-status")).toContainText(/No version leads yet|Nothing is sent yet/);
  await expect(results.getByText("Leads", { exact: true })).toHaveCount(0);
  // Sending B to the rest cannot be undone: it asks first, and Cancel changes nothing.
  await page.getByTestId("ab-pick-B").click();
  const pick = page.getByRole("dialog", { name: "Send version B to the rest?" });
  await expect(pick.getByTestId("ab-pick-summary")).toContainText(`The ${held} reader`);
  await expect(pick.getByTestId("ab-pick-summary")).toContainText("cannot be undone");
  await pick.getByRole("button", { name: "Cancel" }).click();
  await expect(pick).toBeHidden();
  await expect(page.getByTestId("ab-winner")).toHaveCount(0);
  await page.getByTestId("ab-pick-B").click();
  await pick.getByRole("button", { name: "Send B now" }).click();
  await expect(page.getByTestId("ab-winner")).toBeVisible({ timeout: 20_000 });
  await expect(page.getByTestId("ab-row-B")).toContainText("Winner");
  await expect(page.getByTestId("campaign-status")).toHaveText("Sent", { timeout: 90_000 });
  await expect(page.getByTestId("count-sent")).toHaveText("12");

  // The stats page shows the versions too, the winner marked.
  await page.getByTestId("stats-link").click();
  await expect(page.getByTestId("ab-winner")).toBeVisible();

  // One message each: the rest got B, the test share its own version.
  await expect
    .poll(
      async () => {
        const messages = (await (await page.request.get("/dev/inbox/messages.json")).json()) as Caught[];
        const per = readers.map((r) => messages.filter((m) => m.to.some((t) => t.toLowerCase() === r.toLowerCase())).map((m) => m.subject));
        return { counts: per.map((p) => p.length), b: per.filter((p) => p[0] === "Subject B").length };
      },
      { timeout: 20_000 },
    )
    .toEqual({ counts: readers.map(() => 1), b: expect.any(Number) });
  const messages = (await (await page.request.get("/dev/inbox/messages.json")).json()) as Caught[];
  const ours = messages.filter((m) => m.to.some((t) => readers.includes(t.toLowerCase())));
  expect(ours.filter((m) => m.subject === "Subject B").length).toBeGreaterThanOrEqual(held);
  expect(ours.every((m) => m.subject === "Subject A" || m.subject === "Subject B")).toBe(true);

  // Resend to non-openers: nobody opened, so all twelve again, under a new subject, as a
  // draft of its own that links back.
  await gotoHydrated(page, campaignPath);
  await page.getByTestId("resend-button").click();
  const dialog = page.getByRole("dialog", { name: "Send again to readers who did not open?" });
  await dialog.getByLabel("New subject (optional)").fill("In case you missed it");
  await dialog.getByRole("button", { name: "Make the draft" }).click();
  await expect(page).not.toHaveURL(new RegExp(`${campaignPath}$`));
  await waitForHydration(page);
  await page.getByRole("tab", { name: "Settings" }).click();
  await expect(page.getByTestId("resend-audience")).toBeVisible();
  await expect(page.getByLabel("Subject", { exact: true })).toHaveValue("In case you missed it");
  await expect(page.getByTestId("eligible-count")).toContainText("12 readers would get this now", { timeout: 20_000 });
  // The confirmation names who a resend goes to, not the original's lists or segments.
  await page.getByRole("button", { name: "Send now" }).click();
  const confirmResend = page.getByRole("dialog", { name: "Send this campaign now?" });
  await expect(confirmResend.getByTestId("send-summary")).toContainText("goes to the 12 readers of the original campaign who have not opened it");
  await confirmResend.getByRole("button", { name: "Send now" }).click();
  await expect(page.getByTestId("campaign-status")).toHaveText("Sent", { timeout: 90_000 });
  await expect(page.getByTestId("resend-original")).toHaveAttribute("href", campaignPath);
  await gotoHydrated(page, campaignPath);
  await expect(page.getByTestId("resend-copy")).toHaveCount(1);
  await expect
    .poll(
      async () => {
        const all = (await (await page.request.get("/dev/inbox/messages.json")).json()) as Caught[];
        return all.filter((m) => m.subject === "In case you missed it" && m.to.some((t) => readers.includes(t.toLowerCase()))).length;
      },
      { timeout: 20_000 },
    )
    .toBe(12);

  // A second resend of the same original is refused until the author asks for it, having
  // been told that the first one's readers would get it again.
  await page.getByTestId("resend-button").click();
  const second = page.getByRole("dialog", { name: "Send again to readers who did not open?" });
  await expect(second.getByTestId("resend-again-warning")).toBeVisible();
  await second.getByRole("button", { name: "Make the draft" }).click();
  await expect(page.getByText("Another resend would mail those who still have not opened")).toBeVisible();
  await expect(page).toHaveURL(new RegExp(`${campaignPath}$`));
  await page.getByTestId("resend-button").click();
  await second.getByLabel("Make another resend anyway").check();
  await second.getByRole("button", { name: "Make the draft" }).click();
  await expect(page).not.toHaveURL(new RegExp(`${campaignPath}$`));
});
