// An author creates a transactional template (previewed with sample variables), an application
// sends it through the API with an idempotency key (twice: one message), the message arrives in
// the dev inbox, its reader opens it, and the Transactional page shows it with its events.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, verifySendingDomain } from "./helpers";

type Caught = { id: number; to: string[]; subject: string; html: string | null };

test("create a transactional template, send it through the API, see it and its events", async ({ page, request }) => {
  test.setTimeout(120_000);
  const author = uniqueEmail("tx-author");
  await signUpWithWorkspace(page, author, `Shop ${uniqueId()}`);
  await verifySendingDomain(page, "example.com");

  // --- An API key for "the application". ---
  await gotoHydrated(page, "/settings/api-keys");
  await page.locator("#key-name").fill("Shop backend");
  await page.getByRole("button", { name: "Create key" }).click();
  const key = (await page.getByTestId("new-api-key").textContent())?.trim() ?? "";
  expect(key).toMatch(/^hrld_/);
  // Listed with what it may do and who made it; a narrower key for a read-only dashboard.
  const backendRow = page.getByRole("row").filter({ hasText: "Shop backend" });
  await expect(backendRow).toContainText("admin");
  await expect(backendRow).toContainText(author);
  await page.locator("#key-name").fill("Dashboard");
  await page.locator("#key-role").selectOption("viewer");
  await page.getByRole("button", { name: "Create key" }).click();
  await expect(page.getByRole("row").filter({ hasText: "Dashboard" })).toContainText("viewer");

  // --- A template, previewed with its sample variables, then created. ---
  await gotoHydrated(page, "/transactional/templates");
  await page.getByTestId("new-template").click();
  await expect(page).toHaveURL(/\/transactional\/templates\/new$/);
  await gotoHydrated(page, "/transactional/templates/new");
  await page.getByLabel("Name (what the API names)").fill("order-receipt");
  await page.getByLabel("Sender address").fill("shop@example.com");
  await page.getByLabel("Subject").fill("Receipt for order {{ order }}");
  await page.getByLabel("HTML body").fill('<p>Thanks {{ name }}! <a href="https://shop.example/o/{{ order }}">Your order</a></p>');
  await page.getByLabel("Sample variables (JSON)").fill('{"name": "Ada", "order": 7}');
  await page.getByTestId("preview-template").click();
  await expect(page.getByTestId("preview-subject")).toHaveText("Receipt for order 7");
  await page.getByTestId("save-template").click();
  await expect(page).toHaveURL(/\/transactional\/templates\/[0-9a-f-]{36}$/);
  await gotoHydrated(page, "/transactional/templates");
  await expect(page.getByTestId("templates-table")).toContainText("order-receipt");

  // --- The application sends it, and retries the same request: one message. ---
  const to = uniqueEmail("buyer");
  const send = () =>
    request.post("/api/v1/messages", {
      headers: { Authorization: `Bearer ${key}`, "Idempotency-Key": `order-1001-${to}` },
      data: { to, template: "order-receipt", variables: { name: "Grace", order: 1001 } },
    });
  const first = await send();
  expect(first.status()).toBe(201);
  const message = await first.json();
  const again = await send();
  expect(again.status()).toBe(200);
  expect((await again.json()).id).toBe(message.id);

  // --- It arrives once in the dev inbox; the reader opens it. ---
  let caught: Caught[] = [];
  await expect
    .poll(async () => {
      const all = (await (await request.get("/dev/inbox/messages.json")).json()) as Caught[];
      caught = all.filter((m) => m.to.some((t) => t.toLowerCase() === to.toLowerCase()));
      return caught.length;
    }, { timeout: 20_000 })
    .toBe(1);
  expect(caught[0].subject).toBe("Receipt for order 1001");
  const pixel = /src="([^"]*\/o\/[^"]+)"/.exec(caught[0].html ?? "")?.[1];
  expect(pixel, "the message carries an open pixel").toBeTruthy();
  expect((await request.get(pixel!, { headers: { "User-Agent": "Thunderbird/128" } })).status()).toBe(200);
  // Opens are stored in batches a moment after the pixel answers, and the page shows what is
  // stored when it loads (it does not poll): wait until the open is recorded.
  await expect
    .poll(async () => {
      const r = await request.get(`/api/v1/messages/${message.id}`, { headers: { Authorization: `Bearer ${key}` } });
      return ((await r.json()).events ?? []).map((e: { kind: string }) => e.kind);
    }, { timeout: 20_000 })
    .toContain("opened");

  // --- The Transactional page lists it; searching by recipient finds it; its events show. ---
  await gotoHydrated(page, `/transactional?q=${encodeURIComponent(to)}`);
  const row = page.getByTestId("message-row");
  await expect(row).toHaveCount(1);
  await expect(row.getByTestId("message-status")).toHaveText("sent");
  await expect(row.getByTestId("message-outcome")).toHaveText("opened", { timeout: 10_000 });
  await row.getByRole("link", { name: to }).click();
  await expect(page).toHaveURL(new RegExp(`/transactional/messages/${message.id}$`));
  const kinds = page.getByTestId("message-event-kind");
  await expect(kinds).toHaveText(["queued", "sent", "opened"]);
  await expect(page.getByText(`order-1001-${to}`)).toBeVisible();
});
