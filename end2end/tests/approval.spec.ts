// Team governance in the browser: an owner turns on "Require approval before a campaign is
// sent" and invites an author; the author writes a campaign and asks for it to go out; the owner
// finds it in the campaigns list, approves it, watches it send, and reads the story in the
// audit log.
import {
  test,
  expect,
  uniqueEmail,
  uniqueId,
  signUpWithWorkspace,
  fillSignup,
  gotoHydrated,
  mailedLink,
  newInstrumentedContext,
  setUpSender,
  waitForHydration,
} from "./helpers";

test("an author asks, the owner approves, the audit log tells it", async ({ page, browser, baseURL, browserProblems }) => {
  test.setTimeout(240_000);
  const owner = uniqueEmail("approver");
  const author = uniqueEmail("asker");
  await signUpWithWorkspace(page, owner, `Approvals ${uniqueId()}`);

  // --- The owner's set-up: sender, domain, a list with one reader, the rule, the invite. ---
  await setUpSender(page);
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Weekly");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Weekly");
  await gotoHydrated(page, "/audience/readers");
  const reader = uniqueEmail("reader");
  await page.getByLabel("Email", { exact: true }).fill(reader);
  await page.getByLabel("Add to list (confirmed)").selectOption({ label: "Weekly" });
  await page.getByRole("button", { name: "Add reader" }).click();
  await expect(page.getByTestId("readers-table")).toContainText(reader);

  await gotoHydrated(page, "/settings/members");
  await page.getByRole("checkbox", { name: /Require approval before a campaign is sent/ }).check();
  await page.getByRole("button", { name: "Save rules" }).click();
  await expect(page.getByTestId("rules-saved")).toHaveText("Saved.");
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByRole("checkbox", { name: /Require approval before a campaign is sent/ })).toBeChecked();
  await page.getByLabel("Email", { exact: true }).fill(author);
  await page.getByLabel("Role", { exact: true }).selectOption("author");
  await page.getByRole("button", { name: "Send invite" }).click();
  await expect(page.getByText("Invite sent.")).toBeVisible();

  // --- The author joins and asks for a send. ---
  const authorContext = await newInstrumentedContext(browser, baseURL, browserProblems);
  try {
    const a = await authorContext.newPage();
    const invite = await mailedLink(a, author, /https?:\/\/\S+\/invite\/\S+/);
    await gotoHydrated(a, invite);
    await a.getByRole("link", { name: "Create an account to accept" }).click();
    await fillSignup(a, { name: "Author", email: author });
    // Anchored before any "?": the signup page's own URL (/signup?next=/invite/…) also ends in /invite/<token>.
    await expect(a).toHaveURL(/^[^?]*\/invite\/[^/?]+$/);
    await a.getByRole("button", { name: "Accept invite" }).click();
    await expect(a).toHaveURL(/\/settings\/members$/);

    await gotoHydrated(a, "/campaigns");
    await a.getByLabel("Campaign name").fill("Needs a yes");
    await a.getByRole("button", { name: "New campaign" }).click();
    await expect(a).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
    await waitForHydration(a);
    await a.getByLabel("Subject", { exact: true }).fill("Hello {{ reader.name | default(\"friend\") }}");
    await a.getByRole("tab", { name: "Settings" }).click();
    await a.getByRole("checkbox", { name: /Weekly/ }).check();
    await a.getByRole("tab", { name: "Content" }).click();
    await a.getByRole("radio", { name: "Markdown" }).check();
    await a.getByLabel("Body", { exact: true }).fill("An issue an owner has to approve.");
    await expect(a.getByTestId("save-status")).toContainText("Saved at", { timeout: 15_000 });
    await a.getByRole("button", { name: "Ask for approval to send" }).click();
    const dialog = a.getByRole("dialog", { name: "Ask for approval to send this campaign?" });
    await dialog.getByRole("button", { name: "Ask for approval" }).click();
    await expect(a.getByTestId("approval-pending")).toContainText("Waiting for approval");
    await expect(a.getByRole("button", { name: "Approve" })).toHaveCount(0);
  } finally {
    await authorContext.close();
  }

  // --- The owner approves from the list; the campaign goes out. ---
  await gotoHydrated(page, "/campaigns");
  const row = page.getByTestId("campaign-row").filter({ hasText: "Needs a yes" });
  await expect(row.getByTestId("awaiting-approval")).toBeVisible();
  await row.getByRole("link", { name: "Needs a yes" }).click();
  await waitForHydration(page);
  await expect(page.getByTestId("approval-pending")).toContainText(author);
  await page.getByRole("button", { name: "Approve" }).click();
  await expect(page.getByTestId("campaign-status")).toHaveText("Sent", { timeout: 90_000 });

  // --- The audit log, filtered by action. ---
  await gotoHydrated(page, "/settings/audit");
  // Sentences with the campaign's name, not its id.
  const log = page.getByTestId("audit-log");
  await expect(log.getByTestId("audit-sentence").filter({ hasText: "approved sending “Needs a yes”" })).toContainText(owner);
  // A member with a name is named ("Owner approved …"), the address kept for screen readers and
  // in the tooltip.
  await expect(log.getByTestId("audit-sentence").filter({ hasText: "approved sending “Needs a yes”" })).toContainText(
    `Owner (${owner}) approved sending`,
  );
  await expect(log.getByTestId("audit-sentence").filter({ hasText: "asked for approval to send “Needs a yes”" })).toContainText(author);
  await page.getByLabel("Action").selectOption({ label: "Asked for approval to send" });
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/action=campaign.approval_requested/);
  await expect(page.getByTestId("audit-row")).toHaveCount(1);
});
