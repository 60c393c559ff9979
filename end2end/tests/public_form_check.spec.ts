// Past a list's budget of public-form entries (3 an hour on the browser tests' server, set in
// scripts/test.sh), the hosted page comes back with a proof-of-work check, solves it with its
// own inline script (under the page's CSP nonce) and sends itself; the entry then gets its
// confirmation mail like any other.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, newInstrumentedContext, gotoHydrated, mailedLink } from "./helpers";

test("past its budget the hosted form solves its check and sends itself", async ({ page, browser, baseURL, browserProblems }) => {
  test.setTimeout(120_000);
  await signUpWithWorkspace(page, uniqueEmail("budget-author"), `Busy ${uniqueId()}`);

  // A single opt-in public list.
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Busy list");
  await page.getByLabel("Opt-in", { exact: true }).selectOption("single");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Busy list");
  const hosted = await page.getByRole("link", { name: /\/s\// }).first().getAttribute("href");
  expect(hosted).toBeTruthy();

  const readerContext = await newInstrumentedContext(browser, baseURL, browserProblems);
  const readerPage = await readerContext.newPage();
  // A script the page's CSP refused would leave the form waiting: say so instead.
  readerPage.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) browserProblems.push(`CSP: ${m.text()}`);
  });
  const subscribe = async (email: string) => {
    await readerPage.goto(hosted!);
    await readerPage.getByLabel("Email").fill(email);
    await readerPage.getByLabel("Name").fill("Rita Reader");
    await expect(readerPage.getByRole("checkbox", { name: /Busy list/ })).toBeChecked();
    await readerPage.getByRole("button", { name: "Subscribe" }).click();
  };
  for (let i = 0; i < 3; i++) {
    await subscribe(uniqueEmail(`within-${i}`));
    await expect(readerPage.getByRole("heading", { name: "Check your inbox" })).toBeVisible();
  }

  // The fourth is refused with the check; the browser solves it and the form goes again.
  const fourth = uniqueEmail("past-budget");
  const refused = readerPage.waitForResponse((r) => r.request().method() === "POST" && r.status() === 429);
  await subscribe(fourth);
  await refused;
  await expect(readerPage.getByRole("heading", { name: "Check your inbox" })).toBeVisible({ timeout: 60_000 });
  expect(await mailedLink(page, fourth, /https?:\/\/\S+\/confirm\/\S+/)).toContain("/confirm/");
  await readerContext.close();
});
