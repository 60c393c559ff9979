// Segments: an author tags two of three readers, builds a segment from a tag and an
// engagement condition, watches the live count follow the conditions, sends a campaign to the
// segment alone, and finds the mail in the dev inbox for the matching readers only.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, setUpSender, waitForHydration, listWithReaders } from "./helpers";

type Caught = { to: string[]; subject: string };

test("build a segment with a tag and an engagement condition, then send to it", async ({ page }) => {
  test.setTimeout(180_000);
  await signUpWithWorkspace(page, uniqueEmail("segmenter"), `Segments ${uniqueId()}`);
  await setUpSender(page);

  // An empty Segments page says what a segment is for.
  await gotoHydrated(page, "/audience/segments");
  await expect(page.getByText("No segments yet")).toBeVisible();

  const readers = [uniqueEmail("ada"), uniqueEmail("grace"), uniqueEmail("linus")];
  await listWithReaders(page, "Weekly", readers);
  await page.getByRole("checkbox", { name: `Select ${readers[0]}` }).check();
  await page.getByRole("checkbox", { name: `Select ${readers[1]}` }).check();
  await page.getByLabel("Action").selectOption("add_tag");
  await page.getByLabel("Tag", { exact: true }).fill("VIP");
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page.getByText("Done: 2 readers changed.")).toBeVisible();

  // The editor: the first condition starts as a list (all three), then becomes the tag (two);
  // "never opened" keeps both (nobody has opened anything yet).
  await gotoHydrated(page, "/audience/segments");
  await page.getByTestId("new-segment").click();
  await expect(page).toHaveURL(/\/audience\/segments\/new$/);
  await waitForHydration(page);
  const count = page.getByTestId("segment-live-count");
  await expect(count).toHaveText("3");
  await page.getByTestId("condition-kind").first().selectOption("tag");
  await expect(count).toHaveText("2");
  await expect(page.getByTestId("segment-preview")).toContainText(readers[1]);
  await expect(page.getByTestId("segment-preview")).not.toContainText(readers[2]);
  await page.getByTestId("add-condition").selectOption("never_opened");
  await expect(page.getByTestId("segment-rule")).toHaveCount(2);
  await expect(count).toHaveText("2");
  // "Has not" the tag: the third reader only.
  await page.getByLabel("Whether").first().selectOption("no");
  await expect(count).toHaveText("1");
  await page.getByLabel("Whether").first().selectOption("yes");
  await expect(count).toHaveText("2");
  // Saving without a name says so beside the field; with one, the page becomes the segment's.
  await page.getByTestId("save-segment").click();
  await expect(page.getByText("Give the segment a name")).toBeVisible();
  await page.getByLabel("Name", { exact: true }).fill("VIPs who never opened");
  await page.getByLabel("Name", { exact: true }).press("Tab");
  await page.getByTestId("save-segment").click();
  await expect(page).toHaveURL(/\/audience\/segments\/[0-9a-f-]{36}$/);
  // It survives a reload, and the list shows it with its count.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByLabel("Name", { exact: true })).toHaveValue("VIPs who never opened");
  await expect(count).toHaveText("2");
  await gotoHydrated(page, "/audience/segments");
  await expect(page.getByTestId("segment-count")).toHaveText("2 readers");

  // A campaign to the segment alone: the exact count, then the send.
  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name").fill("For the VIPs");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  await page.getByLabel("Subject").fill("Just for you");
  await page.getByRole("tab", { name: "Settings" }).click();
  await page.getByTestId("campaign-segments").getByLabel("VIPs who never opened").check();
  await expect(page.getByTestId("eligible-count")).toContainText("2 readers would get this now", { timeout: 20_000 });
  await page.getByRole("button", { name: "Send now" }).click();
  const dialog = page.getByRole("dialog", { name: "Send this campaign now?" });
  await expect(dialog.getByTestId("send-summary")).toContainText("goes to 2 readers: those in the segment “VIPs who never opened”");
  await dialog.getByRole("button", { name: "Send now" }).click();
  await expect(page.getByTestId("campaign-status")).toHaveText("Sent", { timeout: 90_000 });
  await expect(page.getByTestId("count-sent")).toHaveText("2");

  // The inbox: one copy for each matching reader, none for the third.
  await expect
    .poll(
      async () => {
        const messages = (await (await page.request.get("/dev/inbox/messages.json")).json()) as Caught[];
        return readers.map((r) => messages.filter((m) => m.to.some((t) => t.toLowerCase() === r.toLowerCase())).map((m) => m.subject));
      },
      { timeout: 20_000 },
    )
    .toEqual([["Just for you"], ["Just for you"], []]);
});
