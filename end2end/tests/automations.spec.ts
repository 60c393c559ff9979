// Automations: an author builds a welcome automation for a double opt-in list, turns
// it on, a reader subscribes on the hosted page and confirms, and the welcome mail (with the
// reader's name) arrives in the dev inbox; the automation's page counts the reader at each step.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, newInstrumentedContext, gotoHydrated, setUpSender, waitForHydration, mailedLink } from "./helpers";

type Caught = { to: string[]; subject: string; text: string | null };

test("a welcome automation greets a reader who subscribes on the hosted page", async ({ page, browser, baseURL, browserProblems }) => {
  test.setTimeout(150_000);
  const reader = uniqueEmail("welcomed");
  await signUpWithWorkspace(page, uniqueEmail("automator"), `Welcome ${uniqueId()}`);
  await setUpSender(page);

  // An empty page says what automations are for.
  await gotoHydrated(page, "/automations");
  await expect(page.getByText("No automations yet")).toBeVisible();

  // A double opt-in list.
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Weekly digest");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Weekly digest");
  const hosted = await page.getByRole("link", { name: /\/s\// }).first().getAttribute("href");

  // A new automation starts as a welcome mail on the first list; the author adds a wait and a
  // second mail. An empty subject is refused beside the step.
  await gotoHydrated(page, "/automations");
  await page.getByRole("link", { name: "Make a welcome automation" }).click();
  await expect(page).toHaveURL(/\/automations\/new$/);
  await waitForHydration(page);
  await expect(page.getByRole("combobox", { name: "List", exact: true })).toHaveValue(/[0-9a-f-]{36}/);
  await page.getByTestId("step-subject").first().fill("Welcome, {{ reader.name }}");
  await page.getByTestId("step-subject").first().press("Tab");
  await page.getByTestId("add-step").selectOption("wait");
  await page.getByTestId("add-step").selectOption("email");
  await expect(page.getByTestId("automation-step")).toHaveCount(3);
  await page.getByTestId("save-automation").click();
  await expect(page.getByText("Write a subject.")).toBeVisible();
  await page.getByTestId("step-subject").nth(1).fill("A week in");
  await page.getByTestId("step-subject").nth(1).press("Tab");
  await page.getByTestId("save-automation").click();
  await expect(page).toHaveURL(/\/automations\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  await expect(page.getByTestId("automation-state")).toHaveText("Draft");
  await expect(page.getByTestId("automation-runs-empty")).toBeVisible();

  // Turned on; it survives a reload.
  await page.getByTestId("start-automation").click();
  await expect(page.getByTestId("automation-state")).toHaveText("Live");
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByTestId("automation-state")).toHaveText("Live");
  await expect(page.getByTestId("step-subject").first()).toHaveValue("Welcome, {{ reader.name }}");

  // A reader subscribes on the hosted page and confirms.
  const readerContext = await newInstrumentedContext(browser, baseURL, browserProblems);
  const readerPage = await readerContext.newPage();
  await readerPage.goto(hosted!);
  await readerPage.getByLabel("Email").fill(reader);
  await readerPage.getByLabel("Name").fill("Rita");
  await readerPage.getByRole("button", { name: "Subscribe" }).click();
  await expect(readerPage.getByRole("heading", { name: "Check your inbox" })).toBeVisible();
  const confirmUrl = await mailedLink(readerPage, reader, /https?:\/\/\S+\/confirm\/\S+/);
  await readerPage.goto(confirmUrl);
  await readerPage.getByRole("button", { name: "Confirm subscription" }).click();
  await expect(readerPage.getByTestId("confirmed")).toContainText("Weekly digest");
  await readerContext.close();

  // The welcome arrives, once.
  await expect
    .poll(
      async () => {
        const res = await page.request.get("/dev/inbox/messages.json");
        const all = (await res.json()) as Caught[];
        return all.filter((m) => m.to.includes(reader) && m.subject === "Welcome, Rita").length;
      },
      { timeout: 30_000 },
    )
    .toBe(1);

  // The page counts the reader: reached the mail, waiting at the wait, in the list of readers.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByTestId("step-figures").first()).toContainText("1 reached");
  await expect(page.getByTestId("step-figures").nth(1)).toContainText("1 waiting here");
  await expect(page.getByTestId("automation-runs")).toContainText(reader);
  await expect(page.getByTestId("automation-runs")).toContainText("Waiting at 2. Wait 1 day");

  // Try it: both mails to one address at once, marked as tests.
  const tester = uniqueEmail("tester");
  await page.getByTestId("test-address").fill(tester);
  await page.getByTestId("test-automation").click();
  await expect(page.getByTestId("test-results")).toContainText("Step 1: sent to");
  await expect(page.getByTestId("test-results")).toContainText("Step 3: sent to");
  await expect
    .poll(
      async () => {
        const res = await page.request.get("/dev/inbox/messages.json");
        const all = (await res.json()) as Caught[];
        return all.filter((m) => m.to.includes(tester) && m.subject.startsWith("[Test]")).length;
      },
      { timeout: 20_000 },
    )
    .toBe(2);

  // Paused, it says so; the list shows it with one reader in it.
  await page.getByTestId("pause-automation").click();
  await expect(page.getByTestId("automation-state")).toHaveText("Paused");
  await gotoHydrated(page, "/automations");
  await expect(page.getByTestId("automation-row")).toContainText("1 reader in it");
  await expect(page.getByTestId("automation-status")).toHaveText("Paused");
});

test("a wait-until step keeps its days, time and zone, beside a list step", async ({ page }) => {
  test.setTimeout(90_000);
  await signUpWithWorkspace(page, uniqueEmail("until"), `Until ${uniqueId()}`);
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Members");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Members");
  // The workspace's own zone (Settings), where a "wait until" naming none falls.
  await gotoHydrated(page, "/settings");
  await page.getByLabel("Time zone", { exact: true }).selectOption("Europe/Lisbon");
  await page.getByRole("button", { name: "Save changes" }).click();
  await expect(page.getByText("Saved", { exact: true })).toBeVisible();
  await gotoHydrated(page, "/settings");
  await expect(page.getByLabel("Time zone", { exact: true })).toHaveValue("Europe/Lisbon");

  await gotoHydrated(page, "/automations/new");
  await page.getByTestId("step-subject").first().fill("Hello");
  await page.getByTestId("step-subject").first().press("Tab");
  await page.getByTestId("add-step").selectOption("wait_until");
  await page.getByTestId("add-step").selectOption("unsubscribe");
  await expect(page.getByTestId("automation-step")).toHaveCount(3);
  // A new step waits in the workspace's zone unless another is chosen.
  await expect(page.getByLabel("Time zone", { exact: true })).toHaveValue("");
  await expect(page.getByLabel("Time zone", { exact: true }).locator("option:checked")).toHaveText("The workspace's (Europe/Lisbon)");
  // Keyboard-friendly: each day is a labelled checkbox.
  await page.getByLabel("Tue", { exact: true }).check();
  await page.getByLabel("Thu", { exact: true }).check();
  await page.getByLabel("At", { exact: true }).fill("07:30");
  await page.getByLabel("Time zone", { exact: true }).selectOption("Asia/Tokyo");
  await expect(page.getByLabel("List to take them off")).toHaveValue(/[0-9a-f-]{36}/);
  await page.getByTestId("save-automation").click();
  await expect(page).toHaveURL(/\/automations\/[0-9a-f-]{36}$/);

  await page.reload();
  await waitForHydration(page);
  await expect(page.getByTestId("automation-step").nth(1)).toContainText("Wait until Tue, Thu at 07:30");
  await expect(page.getByLabel("Tue", { exact: true })).toBeChecked();
  await expect(page.getByLabel("Mon", { exact: true })).not.toBeChecked();
  await expect(page.getByLabel("Time zone", { exact: true })).toHaveValue("Asia/Tokyo");
  await expect(page.getByTestId("automation-step").nth(2)).toContainText("Leave a list");
});

test("an automation's mail is built from blocks in the brand, previewed before saving, and arrives as built", async ({ page }) => {
  test.setTimeout(150_000);
  await signUpWithWorkspace(page, uniqueEmail("blockmail"), `Block mail ${uniqueId()}`);
  await setUpSender(page);
  // A brand colour the new mail takes.
  await gotoHydrated(page, "/settings/brand");
  await page.getByLabel("Links and buttons (hex)").fill("#be123c");
  await page.getByRole("button", { name: "Save brand" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Saved" })).toBeVisible();
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Members");
  await page.getByLabel("Opt-in").selectOption("single");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Members");

  // The welcome mail opens in the campaign editor's blocks, in the brand.
  await gotoHydrated(page, "/automations/new");
  const step = page.getByTestId("automation-step").first();
  const blocks = step.getByTestId("step-blocks");
  await expect(blocks.getByTestId("block-editor")).toBeVisible();
  await expect(blocks.locator('[data-testid="block"][data-kind="heading"]')).toHaveCount(1);
  await blocks.getByTestId("block-style").locator("summary").click();
  await expect(blocks.getByLabel("Links and buttons", { exact: true })).toHaveValue("#be123c");
  const heading = blocks.locator('[data-testid="block"][data-kind="heading"]').getByLabel("Heading", { exact: true });
  await heading.fill("Welcome aboard, {{ reader.name | default('friend') }}");

  // The preview renders the mail as it is in the editor, before any save.
  await step.getByRole("button", { name: "Preview this mail" }).click();
  const frame = step.frameLocator('[data-testid="preview-frame"]');
  await expect(frame.getByRole("heading", { name: "Welcome aboard, Sample Reader" })).toBeVisible({ timeout: 15_000 });
  // A broken tag is named by its block, and the block is marked.
  const paragraph = blocks.locator('[data-testid="block"][data-kind="paragraph"]');
  await paragraph.getByLabel("Text", { exact: true }).fill("Thanks {{ reader.name | nosuchfilter }}.");
  await expect(step.getByTestId("template-error")).toContainText("(Paragraph)", { timeout: 15_000 });
  await expect(paragraph).toHaveAttribute("data-template-error", "true");
  await paragraph.getByLabel("Text", { exact: true }).fill("Thanks for joining, {{ reader.name }}.");
  await expect(frame.getByText("Thanks for joining, Sample Reader.")).toBeVisible({ timeout: 15_000 });
  await expect(paragraph).not.toHaveAttribute("data-template-error", "true");

  // Saved, turned on; a reader who joins the list gets the mail as built.
  await page.getByTestId("save-automation").click();
  await expect(page).toHaveURL(/\/automations\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  await expect(page.getByTestId("automation-step").first().locator('[data-testid="block"][data-kind="heading"]').getByLabel("Heading", { exact: true }))
    .toHaveValue("Welcome aboard, {{ reader.name | default('friend') }}");
  await page.getByTestId("start-automation").click();
  await expect(page.getByTestId("automation-state")).toHaveText("Live");
  const reader = uniqueEmail("blockmail-reader");
  await gotoHydrated(page, "/audience/readers");
  await page.getByLabel("Email", { exact: true }).fill(reader);
  await page.getByLabel("Name", { exact: true }).fill("Rosa");
  await page.getByLabel("Add to list (confirmed)").selectOption({ label: "Members" });
  await page.getByRole("button", { name: "Add reader" }).click();
  await expect(page.getByTestId("readers-table")).toContainText(reader);
  await expect
    .poll(
      async () => {
        const all = (await (await page.request.get("/dev/inbox/messages.json")).json()) as (Caught & { html: string | null })[];
        const mine = all.filter((m) => m.to.includes(reader));
        return mine.map((m) => [m.subject, /Welcome aboard, Rosa/.test(m.html ?? ""), /Thanks for joining, Rosa\./.test(m.html ?? ""), /#be123c/i.test(m.html ?? "")]);
      },
      { timeout: 45_000 },
    )
    .toEqual([[expect.stringContaining("Welcome to"), true, true, true]]);
});
