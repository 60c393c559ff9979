// A reader subscribes on the hosted page, confirms from the mail in /dev/inbox, and the author
// sees them confirmed.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, newInstrumentedContext, gotoHydrated, waitForHydration } from "./helpers";

test("double opt-in from the hosted page to a confirmed reader", async ({ page, browser, baseURL, browserProblems }) => {
  const author = uniqueEmail("author");
  const reader = uniqueEmail("reader");
  const workspace = `News ${uniqueId()}`;
  await signUpWithWorkspace(page, author, workspace);

  // The author creates a double opt-in public list.
  await gotoHydrated(page, "/audience");
  await expect(page.getByText("No lists yet")).toBeVisible();
  await page.getByLabel("Name", { exact: true }).fill("Weekly digest");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Weekly digest");
  const hosted = await page.getByRole("link", { name: /\/s\// }).first().getAttribute("href");
  expect(hosted).toBeTruthy();

  // A reader, in another browser, subscribes.
  const readerContext = await newInstrumentedContext(browser, baseURL, browserProblems);
  const readerPage = await readerContext.newPage();
  await readerPage.goto(hosted!);
  await readerPage.getByLabel("Email").fill(reader);
  await readerPage.getByLabel("Name").fill("Rita Reader");
  await expect(readerPage.getByRole("checkbox", { name: /Weekly digest/ })).toBeChecked();
  await readerPage.getByRole("button", { name: "Subscribe" }).click();
  await expect(readerPage.getByRole("heading", { name: "Check your inbox" })).toBeVisible();

  // Still unconfirmed for the author.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByTestId("lists-table")).toContainText("Weekly digest");

  // The confirmation arrives in the dev inbox (through the job queue and real SMTP).
  let confirmUrl = "";
  await expect(async () => {
    await readerPage.goto("/dev/inbox");
    const row = readerPage.getByTestId("inbox-row").filter({ hasText: reader });
    await row.getByRole("link").first().click();
    const text = await readerPage.getByTestId("text-part").innerText();
    const match = text.match(/https?:\/\/\S+\/confirm\/\S+/);
    expect(match).not.toBeNull();
    confirmUrl = match![0];
  }).toPass({ timeout: 20_000 });

  // It comes from the workspace by name (its domain is not verified, so through the system
  // address: "<workspace> via Herald"), not from a bare noreply@ address.
  const caught = (await (await page.request.get("/dev/inbox/messages.json")).json()) as { to: string[]; header_from: string }[];
  const optIn = caught.find((m) => m.to.includes(reader));
  expect(optIn?.header_from).toContain(`${workspace} via Herald`);

  await readerPage.goto(confirmUrl);
  await readerPage.getByRole("button", { name: "Confirm subscription" }).click();
  await expect(readerPage.getByTestId("confirmed")).toContainText("Weekly digest");

  // The author sees one confirmed reader, and the reader's consent history.
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByTestId("confirmed-count").first()).toHaveText("1");
  await page.getByRole("link", { name: "Readers", exact: true }).click();
  await page.getByRole("link", { name: reader }).click();
  await expect(page.getByTestId("reader-email")).toHaveText(reader);
  await expect(page.getByTestId("subscriptions")).toContainText("confirmed");
  await readerContext.close();
});
