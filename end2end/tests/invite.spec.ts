import {
  test,
  expect,
  uniqueEmail,
  uniqueId,
  signUpWithWorkspace,
  fillSignup,
  gotoHydrated,
  waitForHydration,
  logOut,
  newInstrumentedContext,
} from "./helpers";

test("an owner invites an author, who signs up from the email and joins", async ({
  page,
  browser,
  baseURL,
  browserProblems,
}) => {
  const owner = uniqueEmail("owner");
  const invitee = uniqueEmail("author");
  const workspace = `Team Letter ${uniqueId()}`;

  // --- The owner sets up a workspace and sends the invite. ---
  await signUpWithWorkspace(page, owner, workspace);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Settings" }).click();
  await expect(page).toHaveURL(/\/settings$/);
  await page.getByRole("navigation", { name: "Settings" }).getByRole("link", { name: "Members" }).click();
  await expect(page).toHaveURL(/\/settings\/members$/);

  await page.getByLabel("Email", { exact: true }).fill(invitee);
  await page.getByLabel("Role", { exact: true }).selectOption("author");
  await page.getByRole("button", { name: "Send invite" }).click();
  await expect(page.getByText("Invite sent.")).toBeVisible();
  await expect(page.getByTestId("pending-invites")).toContainText(invitee);

  // --- The invitee, in a browser of their own, reads the email in the dev inbox. ---
  const inviteeContext = await newInstrumentedContext(browser, baseURL, browserProblems);
  try {
    const mail = await inviteeContext.newPage();
    // The mail goes out through the job queue: give the worker a moment.
    const row = mail.getByTestId("inbox-row").filter({ hasText: invitee });
    await expect(async () => {
      await mail.goto("/dev/inbox");
      await expect(row).toHaveCount(1, { timeout: 1_000 });
    }).toPass({ timeout: 20_000, intervals: [500, 1_000, 2_000] });
    await expect(row.getByRole("link")).toContainText(workspace);
    await row.getByRole("link").click();
    await expect(mail).toHaveURL(/\/dev\/inbox\/\d+$/);

    const text = (await mail.getByTestId("text-part").textContent()) ?? "";
    const link = text.match(/https?:\/\/\S+\/invite\/\S+/)?.[0];
    expect(link, `an invite link in the text part:\n${text}`).toBeTruthy();
    // Links in mail are absolute and point at HERALD_BASE_URL.
    expect(link!.startsWith(`${baseURL!.replace(/\/$/, "")}/invite/`)).toBe(true);

    // The same link in the HTML part opens in a tab of its own, outside the preview's sandbox,
    // where the page works (inside the frame it ran without scripts and never finished).
    const opened = mail.waitForEvent("popup");
    await mail.frameLocator('[data-testid="html-part"]').getByRole("link").filter({ hasText: /accept|join/i }).first().click();
    const tab = await opened;
    await expect(tab).toHaveURL(/\/invite\/[^/?]+$/);
    await waitForHydration(tab);
    await expect(tab.getByTestId("invite-workspace")).toHaveText(workspace);
    await tab.close();

    // --- They follow it, create an account, and accept. ---
    await gotoHydrated(mail, link!);
    await expect(mail.getByTestId("invite-workspace")).toHaveText(workspace);
    await mail.getByRole("link", { name: "Create an account to accept" }).click();
    await expect(mail).toHaveURL(/\/signup\?next=\/invite\//);
    await fillSignup(mail, { name: "Author", email: invitee });

    // The sign-up link came to the invited address, so the account is confirmed: back on the
    // invite, logged in, they can join at once.
    await expect(mail).toHaveURL(/^[^?]*\/invite\/[^/?]+$/);
    await expect(mail.getByTestId("invite-workspace")).toHaveText(workspace);
    await mail.getByRole("button", { name: "Accept invite" }).click();
    await expect(mail).toHaveURL(/\/settings\/members$/);
    const inviteeTable = mail.getByTestId("members-table");
    await expect(inviteeTable).toContainText(owner);
    await expect(inviteeTable).toContainText(invitee);
    await expect(inviteeTable.getByRole("row").filter({ hasText: invitee })).toContainText("author");
    await expect(mail.getByTestId("current-user")).toHaveText(invitee);

    // --- The owner sees the new member, and the invite is no longer pending. ---
    await page.reload();
    await waitForHydration(page);
    const ownerTable = page.getByTestId("members-table");
    await expect(ownerTable).toContainText(owner);
    await expect(ownerTable).toContainText(invitee);
    await expect(page.getByTestId("pending-invites")).toHaveCount(0);

    await logOut(mail);
    await logOut(page);
  } finally {
    await inviteeContext.close();
  }
});
