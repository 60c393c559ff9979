// An author writes a campaign, watches it autosave and render in the preview, sends a test,
// sends it to a list of three confirmed readers, follows the progress to 100 %, and finds
// exactly one copy per reader in the dev inbox. One reader opens it there (the pixel loads) and
// follows its link; the stats page counts 1 open and 1 click and draws its charts.
import type { APIRequestContext } from "@playwright/test";
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, setUpSender, waitForHydration } from "./helpers";

/** One message caught by the dev mail catcher (`/dev/inbox/messages.json`). */
type Caught = { id: number; from: string; to: string[]; subject: string; text: string | null; html: string | null };

async function inbox(request: APIRequestContext): Promise<Caught[]> {
  const res = await request.get("/dev/inbox/messages.json");
  expect(res.ok(), "the dev inbox answers").toBe(true);
  return (await res.json()) as Caught[];
}

function addressedTo(messages: Caught[], address: string): Caught[] {
  return messages.filter((m) => m.to.some((t) => t.toLowerCase() === address.toLowerCase()));
}

test("write, preview, test-send and send a campaign to a three-reader list", async ({ page }) => {
  test.setTimeout(180_000);
  await signUpWithWorkspace(page, uniqueEmail("campaigner"), `Campaigns ${uniqueId()}`);

  // --- The workspace's postal address (required to send) and default sender. ---
  await setUpSender(page);

  // --- A list "Weekly" with three readers added as confirmed. ---
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill("Weekly");
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText("Weekly");

  const readers = [
    { name: "Ada", email: uniqueEmail("ada") },
    { name: "Grace", email: uniqueEmail("grace") },
    { name: "Linus", email: uniqueEmail("linus") },
  ];
  await gotoHydrated(page, "/audience/readers");
  for (const r of readers) {
    await page.getByLabel("Email", { exact: true }).fill(r.email);
    await page.getByLabel("Name", { exact: true }).fill(r.name);
    await page.getByLabel("Add to list (confirmed)").selectOption({ label: "Weekly" });
    await page.getByRole("button", { name: "Add reader" }).click();
    await expect(page.getByTestId("readers-table")).toContainText(r.email);
  }
  await gotoHydrated(page, "/audience");
  await expect(page.getByTestId("confirmed-count").first()).toHaveText("3");

  // --- A new draft, from the campaigns page. ---
  await gotoHydrated(page, "/campaigns");
  await expect(page.getByTestId("campaigns-empty")).toBeVisible();
  // The postal address is given already: the empty state does not ask for it again.
  await expect(page.getByTestId("campaigns-before-first-send")).not.toContainText("postal address");
  // A search that finds nothing says so, without a console warning (the list once read its
  // filter outside a reactive context).
  const warnings: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "warning") warnings.push(m.text());
  });
  await gotoHydrated(page, "/campaigns?q=no+such+campaign");
  await expect(page.getByTestId("campaigns-no-match")).toBeVisible();
  expect(warnings).toEqual([]);
  await gotoHydrated(page, "/campaigns");
  await page.getByLabel("Campaign name").fill("November issue");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await waitForHydration(page);
  await expect(page.getByRole("heading", { level: 1, name: "November issue" })).toBeVisible();
  // --- Its settings, a view of their own: the workspace's default sender filled in the
  // draft's. ---
  await page.getByRole("tab", { name: "Settings" }).click();
  await expect(page.getByLabel("From email")).toHaveValue("weekly@example.com");
  // A From address on a domain the workspace has not verified is named as it is typed, with
  // the way to fix it, not only when sending.
  await page.getByLabel("From email").fill("news@unverified.example");
  const fromWarnings = page.getByTestId("from_email-warnings");
  await expect(fromWarnings).toContainText("unverified.example is not a verified sending domain", { timeout: 15_000 });
  await expect(fromWarnings.getByRole("link", { name: /Settings → Domains/ })).toHaveAttribute("href", "/settings/domains");
  await page.getByLabel("From email").fill("weekly@example.com");
  await expect(fromWarnings).toBeHidden({ timeout: 15_000 });
  await page.getByRole("checkbox", { name: /Weekly/ }).check();
  await expect(page.getByTestId("audience-estimate")).toContainText("Up to 3 confirmed readers on 1 list");

  // --- Write it; it saves by itself. A merge-tag typo would render as nothing: it is named
  // beside the field as it is typed, with the name meant, and goes once it is fixed. ---
  await page.getByRole("tab", { name: "Content" }).click();
  await page.getByLabel("Subject", { exact: true }).fill("Hello {{ reader.nmae }}");
  await expect(page.getByTestId("subject-warnings")).toContainText("Did you mean “reader.name”?", { timeout: 15_000 });
  await page.getByLabel("Subject", { exact: true }).fill("Hello {{ reader.name }}");
  await expect(page.getByTestId("subject-warnings")).toBeHidden({ timeout: 15_000 });
  // New campaigns open in the block editor; this one is written in Markdown (the starter
  // blocks are untouched, so switching asks nothing).
  await page.getByRole("radio", { name: "Markdown" }).check();
  await page
    .getByLabel("Body", { exact: true })
    .fill("# Hi {{ reader.name }}\n\nThis is the November issue of the Weekly.\n\n[Read it online](https://weekly.example/november)");
  await expect(page.getByTestId("save-status")).toContainText("Saved at", { timeout: 15_000 });

  // --- The preview renders the saved draft, in a sandboxed frame. ---
  const frameElement = page.getByTestId("preview-frame");
  await expect(frameElement).toHaveAttribute("sandbox", "");
  const frame = page.frameLocator('[data-testid="preview-frame"]');
  await expect(frame.getByText("This is the November issue of the Weekly.")).toBeVisible();
  await expect(frame.getByRole("heading", { name: "Hi Sample Reader" })).toBeVisible();
  await expect(page.getByTestId("preview-subject")).toHaveText("Hello Sample Reader");

  // As a real reader, and as plain text.
  await page.getByLabel("Preview as reader").fill(readers[0].email);
  await page.getByLabel("Preview as reader").press("Enter");
  await expect(page.getByTestId("preview-subject")).toHaveText("Hello Ada");
  await expect(frame.getByRole("heading", { name: "Hi Ada" })).toBeVisible();
  await page.getByRole("button", { name: "Plain text", exact: true }).click();
  await expect(page.getByTestId("preview-text")).toContainText("This is the November issue of the Weekly.");
  await page.getByRole("button", { name: "Desktop", exact: true }).click();
  await expect(frameElement).toBeVisible();

  // --- A test send to one address, found in the dev inbox. ---
  const tester = uniqueEmail("tester");
  await page.getByLabel("Send a test to").fill(tester);
  await page.getByRole("button", { name: "Send test" }).click();
  const result = page.getByTestId("test-result");
  await expect(result).toHaveCount(1, { timeout: 20_000 });
  await expect(result).toContainText(tester);
  await expect(result).toContainText("accepted");
  await expect
    .poll(async () => addressedTo(await inbox(page.request), tester).map((m) => m.subject), { timeout: 20_000 })
    .toEqual(["[Test] Hello Sample Reader"]);

  // --- Send now, after a confirmation that names the audience. ---
  await page.getByRole("button", { name: "Send now" }).click();
  const dialog = page.getByRole("dialog", { name: "Send this campaign now?" });
  await expect(dialog).toBeVisible();
  await expect(dialog.getByTestId("send-summary")).toContainText("goes to 3 readers: those confirmed on the list “Weekly”");
  await dialog.getByRole("button", { name: "Send now" }).click();

  // --- The same page becomes the progress view and follows the send to the end. ---
  await expect(page.getByTestId("send-percent")).toBeVisible({ timeout: 20_000 });
  await expect(page.getByTestId("campaign-status")).toHaveText("Sent", { timeout: 90_000 });
  await expect(page.getByTestId("send-percent")).toHaveText("100%");
  await expect(page.getByTestId("count-sent")).toHaveText("3");
  await expect(page.getByTestId("count-failed")).toHaveText("0");
  await expect(page.getByTestId("count-queued")).toHaveText("0");
  await expect(page.getByTestId("no-failures")).toBeVisible();

  // --- Exactly one copy per reader, personalised. ---
  await expect
    .poll(
      async () => {
        const messages = await inbox(page.request);
        return readers.map((r) => addressedTo(messages, r.email).map((m) => m.subject));
      },
      { timeout: 20_000 },
    )
    .toEqual(readers.map((r) => [`Hello ${r.name}`]));
  const messages = await inbox(page.request);
  for (const r of readers) {
    const [mail] = addressedTo(messages, r.email);
    expect(mail.text ?? "").toContain(`Hi ${r.name}`);
    expect(mail.text ?? "").toContain("This is the November issue of the Weekly.");
    expect(mail.from).toBe("weekly@example.com");
  }

  // --- The progress view links to the stats page. ---
  const sentPath = new URL(page.url()).pathname;
  const statsPath = `${sentPath}/stats`;
  await expect(page.getByTestId("stats-link")).toHaveAttribute("href", statsPath);


  // --- Ada reads her copy (as caught in the dev inbox): her mail client loads the pixel, and
  // she follows the link. Requested directly rather than through the inbox page's preview
  // frame, whose image load is not deterministic, so exactly one open is expected.
  const [adaMail] = addressedTo(messages, readers[0].email);
  const html = (adaMail.html ?? "").replaceAll("&amp;", "&");
  expect(html).not.toContain('href="https://weekly.example/november"');
  const pixelSrc = html.match(/src="([^"]*\/o\/[A-Za-z0-9_-]+)"/)?.[1] ?? "";
  const href = html.match(/href="([^"]*\/c\/[A-Za-z0-9_-]+)"[^>]*>Read it online</)?.[1] ?? "";
  expect(pixelSrc, "the message has an open pixel").not.toBe("");
  expect(href, "the link is tracked").not.toBe("");
  const client = { headers: { "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Thunderbird/115.0" } };
  const pixel = await page.request.get(pixelSrc, client);
  expect(pixel.status()).toBe(200);
  expect(pixel.headers()["content-type"]).toBe("image/gif");
  // A tracked redirect to the URL registered for the link.
  const click = await page.request.get(href, { ...client, maxRedirects: 0 });
  expect(click.status()).toBe(302);
  expect(click.headers()["location"]).toBe("https://weekly.example/november");

  // --- The stats page: 1 open, 1 click, and its charts drawn with the bundled ECharts. ---
  await gotoHydrated(page, statsPath);
  await expect(page.getByTestId("stat-sent")).toHaveText("3");
  // Hits are written in batches; the page refreshes itself every 10 seconds.
  await expect(page.getByTestId("stat-unique-opens")).toHaveText("1", { timeout: 30_000 });
  await expect(page.getByTestId("stat-opens")).toHaveText("1");
  await expect(page.getByTestId("stat-unique-clicks")).toHaveText("1");
  await expect(page.getByTestId("stat-clicks")).toHaveText("1");
  // The three figures that matter lead, as rates of what was sent (no delivery reports here,
  // which the details say plainly rather than as a failure).
  await expect(page.getByTestId("headline-delivered")).toHaveText("3");
  await expect(page.getByTestId("stats-headline")).toContainText("33.3 % of sent");
  await expect(page.getByTestId("headline-clicks")).toHaveText("1");
  await expect(page.getByTestId("delivery-note")).toBeVisible();
  await expect(page.getByText("needs a provider webhook")).toHaveCount(0);
  // One link: a table, not a chart of one bar.
  await expect(page.getByTestId("links-table")).toContainText("https://weekly.example/november");
  await expect(page.getByTestId("chart-links")).toHaveCount(0);
  for (const chart of ["chart-funnel", "chart-timeline", "chart-domains"]) {
    await expect(page.getByTestId(chart)).toHaveAttribute("data-chart-ready", "true", { timeout: 20_000 });
    await expect(page.getByTestId(chart).locator("svg").first()).toBeVisible();
  }
  // In Herald's palette; the funnel names each step on its axis, with no bar where there is no
  // figure; this one-day send's timeline is labelled by the hour.
  const option = async (id: string) => JSON.parse((await page.getByTestId(id).getAttribute("data-chart"))!);
  type Axis = { data?: string[] };
  const axis = (a: Axis | Axis[]) => (Array.isArray(a) ? a[0] : a);
  const funnel = await option("chart-funnel");
  expect(funnel.color[0]).toBe("#4f46e5");
  const steps = axis(funnel.yAxis).data as string[];
  expect(steps).toContain("Sent");
  expect(funnel.series[0].data[steps.indexOf("Sent")]).toBe(3);
  const timelineOption = await option("chart-timeline");
  // (one hour of events is drawn as bars, its hour on the vertical axis)
  const hours = [timelineOption.xAxis, timelineOption.yAxis].map(axis).find((a) => a?.data)!.data!;
  expect(hours.length).toBeGreaterThan(0);
  for (const label of hours) expect(label).toMatch(/^\d{2}:00$/);
  // On a phone the three figures sit side by side and the first chart follows on the first
  // screen; the other figures come after the charts, not before them.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.evaluate(() => window.scrollTo(0, 0));
  const timeline = await page.getByTestId("chart-timeline").boundingBox();
  expect(timeline!.y, "the first chart starts on the first screen").toBeLessThan(844);
  const details = await page.getByTestId("stats-details").boundingBox();
  expect(details!.y, "the other figures follow the charts").toBeGreaterThan(timeline!.y);
  await page.setViewportSize({ width: 1280, height: 720 });
  // The dashboard's recent campaigns show the same open and click rates.
  await gotoHydrated(page, "/");
  await expect(page.getByTestId("recent-campaigns").getByRole("row", { name: /November issue/ })).toContainText("33.3 %");
  // ECharts came from this server, not a CDN.
  const scripts = await page.evaluate(() => Array.from(document.scripts).map((s) => s.src));
  expect(scripts.some((src) => src.endsWith("/vendor/echarts.min.js"))).toBe(true);
  expect(scripts.every((src) => src === "" || src.startsWith(new URL(page.url()).origin))).toBe(true);

  // --- The campaigns page lists it as sent to three readers. ---
  await gotoHydrated(page, "/campaigns");
  const row = page.getByTestId("campaign-row").filter({ hasText: "November issue" });
  await expect(row.getByTestId("status-badge")).toHaveText("Sent");
  await expect(row).toContainText("3");
  // One of three opened and clicked.
  await expect(row.getByTestId("open-rate")).toHaveText("33.3 %");
  await expect(row.getByTestId("click-rate")).toHaveText("33.3 %");

  // --- Search and filters, kept in the address. ---
  await page.getByLabel("Campaign name").fill("December draft");
  await page.getByRole("button", { name: "New campaign" }).click();
  await expect(page).toHaveURL(/\/campaigns\/[0-9a-f-]{36}$/);
  await gotoHydrated(page, "/campaigns");
  await expect(page.getByTestId("campaign-row")).toHaveCount(2);
  await page.getByLabel("Search", { exact: true }).fill("novem");
  await page.getByLabel("Search", { exact: true }).press("Enter");
  await expect(page).toHaveURL(/[?&]q=novem/);
  await expect(page.getByTestId("campaign-row")).toHaveCount(1);
  await expect(page.getByTestId("campaign-row")).toContainText("November issue");
  await page.getByLabel("Search", { exact: true }).fill("");
  await page.getByLabel("Status", { exact: true }).selectOption("draft");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page.getByTestId("campaign-row")).toHaveCount(1);
  await expect(page.getByTestId("campaign-row")).toContainText("December draft");
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByLabel("Status", { exact: true })).toHaveValue("draft");
  await expect(page.getByTestId("campaign-row")).toHaveCount(1);
  // Days before anything was made: nothing matches, and the page says so.
  await gotoHydrated(page, "/campaigns?to=2020-01-01");
  await expect(page.getByTestId("campaigns-no-match")).toBeVisible();
  await page.getByRole("link", { name: "Clear" }).click();
  await expect(page.getByTestId("campaign-row")).toHaveCount(2);

  // --- A sent campaign can be duplicated into a new draft with what was written. ---
  await gotoHydrated(page, sentPath);
  await page.getByTestId("duplicate-button").click();
  await expect(page).not.toHaveURL(new RegExp(`${sentPath}$`));
  await expect(page.getByRole("heading", { level: 1, name: "November issue (copy)" })).toBeVisible();
  await expect(page.getByLabel("Body", { exact: true })).toHaveValue(/This is the November issue of the Weekly\./);
  await page.getByRole("tab", { name: "Settings" }).click();
  await expect(page.getByRole("checkbox", { name: /Weekly/ })).toBeChecked();
});
