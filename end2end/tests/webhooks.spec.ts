// An admin adds a webhook endpoint (a receiver this test runs on a local port), copies its
// signing secret, sends a test event and sees it delivered in the endpoint's log; the receiver
// checks the signature with the Standard Webhooks library. Then a real change (a reader joining a
// list) reaches the receiver too.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, listWithReaders } from "./helpers";

type Received = { headers: http.IncomingHttpHeaders; body: string };

async function receiver(): Promise<{ url: string; received: Received[]; close: () => void }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}/hooks`, received, close: () => server.close() };
}

function verified(secret: string, r: Received): { type: string; data: Record<string, unknown> } {
  return new Webhook(secret).verify(r.body, {
    "webhook-id": String(r.headers["webhook-id"]),
    "webhook-timestamp": String(r.headers["webhook-timestamp"]),
    "webhook-signature": String(r.headers["webhook-signature"]),
  }) as { type: string; data: Record<string, unknown> };
}

test("add a webhook endpoint, send a test event, see it delivered and verified", async ({ page }) => {
  test.setTimeout(90_000);
  const hooks = await receiver();
  try {
    await signUpWithWorkspace(page, uniqueEmail("hooks-admin"), `Hooks ${uniqueId()}`);
    await gotoHydrated(page, "/settings/webhooks");
    await expect(page.getByText("No endpoints yet.")).toBeVisible();

    // Nothing chosen to receive: refused, with the reason.
    await page.getByLabel("Endpoint URL").fill(hooks.url);
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await expect(page.getByText("Choose at least one event type.")).toBeVisible();

    await page.getByLabel("Description (optional)").fill("CRM sync");
    await page.getByLabel("reader.subscribed").check();
    await page.getByLabel("reader.confirmed").check();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const secret = ((await page.getByTestId("endpoint-secret").textContent()) ?? "").trim();
    expect(secret).toMatch(/^whsec_/);
    await expect(page.getByTestId("endpoints-table")).toContainText(hooks.url);

    // The endpoint's page: a test event, delivered, in its log.
    await page.getByRole("link", { name: /Open the endpoint/ }).click();
    await expect(page.getByTestId("endpoint-url")).toHaveText(hooks.url);
    await gotoHydrated(page, page.url());
    await expect(page.getByText("Nothing sent yet.")).toBeVisible();
    await page.getByRole("button", { name: "Send a test event" }).click();
    const testRow = page.getByTestId("delivery").filter({ hasText: "webhook.test" });
    await expect(testRow.getByTestId("delivery-state")).toHaveText("delivered", { timeout: 30_000 });
    await expect(testRow).toContainText("204");
    expect(hooks.received.length).toBe(1);
    expect(verified(secret, hooks.received[0]).type).toBe("webhook.test");

    // A reader joining a list (single opt-in, added on the readers page) reaches it too.
    const reader = uniqueEmail("hooked-reader");
    await listWithReaders(page, `Hooked ${uniqueId()}`, [reader]);
    await expect
      .poll(() => hooks.received.map((r) => verified(secret, r).type).sort(), { timeout: 30_000 })
      .toEqual(["reader.confirmed", "reader.subscribed", "webhook.test"]);
    const joined = verified(secret, hooks.received.find((r) => r.body.includes("reader.subscribed"))!);
    expect((joined.data.reader as { email: string }).email).toBe(reader);
  } finally {
    hooks.close();
  }
});
