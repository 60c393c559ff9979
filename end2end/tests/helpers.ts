// Shared steps and fixtures for Herald's browser tests.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createHmac } from "node:crypto";
import { test as base, expect, type Browser, type BrowserContext, type Locator, type Page } from "@playwright/test";

export { expect };

export const PASSWORD = "correct horse battery staple";

/** Unique per run and per call, so tests never collide with earlier runs' accounts. */
export function uniqueId(): string {
  return `${Date.now()}-${Math.random().toString(36).slice(2, 7)}`;
}

export function uniqueEmail(prefix: string): string {
  return `${prefix}-${uniqueId()}@example.com`;
}

// Leptos renders every page on the server, then the wasm bundle hydrates it. Until it has,
// forms still work (they post natively) but nothing reactive does. There is no "hydrated" event,
// so this probe, injected before any page script, notes when the wasm module is instantiated:
// the hydration script calls hydrate() in the promise chain right after, and a setTimeout(0)
// runs only once that chain (and the microtasks hydration queues) has finished.
const HYDRATION_PROBE = `(() => {
  const mark = (promise) => {
    promise.then(() => setTimeout(() => { window.__heraldHydrated = true; }, 0), () => {});
    return promise;
  };
  const streaming = WebAssembly.instantiateStreaming;
  if (streaming) {
    WebAssembly.instantiateStreaming = function (...args) { return mark(streaming.apply(this, args)); };
  }
  const instantiate = WebAssembly.instantiate;
  WebAssembly.instantiate = function (...args) { return mark(instantiate.apply(this, args)); };
})();`;

/**
 * Adds the hydration probe to a browser context and collects what would mean the front end is
 * broken: uncaught exceptions and Rust panics (console_error_panic_hook logs "panicked at").
 */
export async function instrument(context: BrowserContext, problems: string[]): Promise<void> {
  await context.addInitScript(HYDRATION_PROBE);
  const watch = (page: Page) => {
    page.on("pageerror", (e) => problems.push(`${page.url()}: uncaught ${e.name}: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error" && /panicked|hydration/i.test(m.text())) {
        problems.push(`${page.url()}: console error: ${m.text()}`);
      }
    });
  };
  context.pages().forEach(watch);
  context.on("page", watch);
}

/** A second, independent browser (its own cookies), instrumented like the default one. */
export async function newInstrumentedContext(
  browser: Browser,
  baseURL: string | undefined,
  problems: string[],
): Promise<BrowserContext> {
  const context = await browser.newContext({ baseURL });
  await instrument(context, problems);
  return context;
}

/**
 * `test` with the default context instrumented; each test fails if the browser reported a panic
 * or an uncaught exception, even when the assertions passed.
 */
export const test = base.extend<{ browserProblems: string[] }>({
  // eslint-disable-next-line no-empty-pattern
  browserProblems: async ({}, use) => {
    await use([]);
  },
  context: async ({ context, browserProblems }, use) => {
    await instrument(context, browserProblems);
    await use(context);
  },
  page: async ({ page, browserProblems }, use) => {
    await use(page);
    expect(browserProblems, "errors reported by the browser").toEqual([]);
  },
});

export async function waitForHydration(page: Page): Promise<void> {
  await page.waitForFunction(() => (window as unknown as { __heraldHydrated?: boolean }).__heraldHydrated === true, null, {
    timeout: 30_000,
  });
}

/** Loads a page and waits until the front end has hydrated it. */
export async function gotoHydrated(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await waitForHydration(page);
}

/** Signs up from the current page (/signup): the address and name, then the link from the dev
 * inbox, where the password is chosen. Ends logged in, wherever the sign-up's `next` leads. */
export async function fillSignup(page: Page, account: { name: string; email: string; password?: string }): Promise<void> {
  await page.getByLabel("Your name").fill(account.name);
  await page.getByLabel("Email", { exact: true }).fill(account.email);
  await page.getByRole("button", { name: "Create account" }).click();
  await expect(page.getByTestId("signup-sent")).toContainText(account.email);
  const link = await mailedLink(page, account.email, /https?:\/\/\S+\/signup\/finish\?token=\S+/);
  await gotoHydrated(page, link);
  await expect(page.getByTestId("signup-email")).toHaveValue(account.email);
  await page.getByLabel("Password", { exact: true }).fill(account.password ?? PASSWORD);
  await page.getByRole("button", { name: "Create account" }).click();
}

/** Fills in and submits the login form on the current page (/login). */
export async function fillLogin(page: Page, email: string, password: string = PASSWORD): Promise<void> {
  await page.getByLabel("Email", { exact: true }).fill(email);
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Log in" }).click();
}

/** From /workspaces/new: creates a workspace and waits for its dashboard. */
export async function createWorkspace(page: Page, name: string): Promise<void> {
  await expect(page).toHaveURL(/\/workspaces\/new$/);
  await page.getByLabel("Workspace name").fill(name);
  await page.getByRole("button", { name: "Create workspace" }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByRole("heading", { level: 1, name })).toBeVisible();
}

/** Signs a new account up (through the mailed link) and creates its first workspace; ends on
 * the dashboard. */
export async function signUpWithWorkspace(page: Page, email: string, workspace: string): Promise<void> {
  await gotoHydrated(page, "/signup");
  await fillSignup(page, { name: "Owner", email });
  await expect(page).toHaveURL(/\/workspaces\/new$/);
  await createWorkspace(page, workspace);
  await expect(page.getByTestId("current-user")).toHaveText(email);
}

export async function logOut(page: Page): Promise<void> {
  // The button is an action form: clicked before the page has hydrated, a busy machine can lose
  // the click between the server's page and the front end taking it over.
  await waitForHydration(page);
  await page.getByRole("button", { name: "Log out" }).click();
  await expect(page).toHaveURL(/\/login(\?.*)?$/);
}

/** The first link matching `pattern` in the newest mail to `to` in the dev inbox (waits for it). */
export async function mailedLink(page: Page, to: string, pattern: RegExp): Promise<string> {
  let link: string | undefined;
  await expect(async () => {
    const res = await page.request.get("/dev/inbox/messages.json");
    const messages = (await res.json()) as { to: string[]; text: string | null }[];
    // Newest first.
    link = messages
      .filter((m) => m.to.some((t) => t.toLowerCase() === to.toLowerCase()))
      .map((m) => m.text?.match(pattern)?.[0])
      .find((l): l is string => !!l);
    expect(link).toBeTruthy();
  }).toPass({ timeout: 20_000, intervals: [500, 1_000, 2_000] });
  return link!;
}

/** The six-digit TOTP code (RFC 6238, SHA-1, 30 s) for a base32 secret at `at` (ms). */
export function totpCode(secretBase32: string, at: number = Date.now()): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const c of secretBase32.replace(/=+$/, "").toUpperCase()) {
    bits += alphabet.indexOf(c).toString(2).padStart(5, "0");
  }
  const key = Buffer.from((bits.match(/.{8}/g) ?? []).map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 1000 / 30)));
  const mac = createHmac("sha1", key).update(counter).digest();
  const offset = mac[mac.length - 1] & 15;
  const code = (mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000;
  return code.toString().padStart(6, "0");
}

/** The server's own binary with the server's settings (HERALD_E2E_CLI, set by scripts/test.sh):
 * the operator's commands. */
export function herald(...args: string[]): string {
  const cli = process.env.HERALD_E2E_CLI;
  if (!cli) throw new Error("HERALD_E2E_CLI is not set: run the browser tests through `make test`");
  return execFileSync(cli, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** What a workspace needs before it can send: a postal address, a default sender
 * (The Weekly <weekly@example.com>) and example.com as a verified sending domain. */
export async function setUpSender(page: Page): Promise<void> {
  await gotoHydrated(page, "/settings");
  await page.getByLabel("Postal address").fill("Herald Ltd, 1 Main Street, Springfield");
  await page.getByLabel("Default sender name").fill("The Weekly");
  await page.getByLabel("Default sender email").fill("weekly@example.com");
  await page.getByRole("button", { name: "Save changes" }).click();
  await expect(page.getByText("Saved", { exact: true })).toBeVisible();
  await verifySendingDomain(page, "example.com");
}

/** Creates the list `name` on the Audience page and adds each of `emails` to it, confirmed,
 * from the readers page (as an author would, one by one). */
export async function listWithReaders(page: Page, name: string, emails: string[]): Promise<void> {
  await gotoHydrated(page, "/audience");
  await page.getByLabel("Name", { exact: true }).fill(name);
  await page.getByRole("button", { name: "Create list" }).click();
  await expect(page.getByTestId("lists-table")).toContainText(name);
  await gotoHydrated(page, "/audience/readers");
  for (const email of emails) {
    await page.getByLabel("Email", { exact: true }).fill(email);
    await page.getByLabel("Add to list (confirmed)").selectOption({ label: name });
    await page.getByRole("button", { name: "Add reader" }).click();
    await expect(page.getByTestId("readers-table")).toContainText(email);
  }
}

/** Adds `domain` on Settings → Domains, where it shows as not verified with the DNS records to
 * publish; then an operator verifies it (`herald admin verify-domain`: the browser tests have no
 * DNS of their own) and the page says so after a reload. */
export async function verifySendingDomain(page: Page, domain: string): Promise<void> {
  await gotoHydrated(page, "/settings");
  const slug = ((await page.getByText("Address: /s/").textContent()) ?? "").replace("Address: /s/", "").trim();
  expect(slug).not.toBe("");
  await gotoHydrated(page, "/settings/domains");
  await page.getByLabel("Domain").fill(domain);
  await page.getByRole("button", { name: "Add domain" }).click();
  const card = page.getByTestId("sending-domain").filter({ hasText: domain });
  await expect(card.getByText("Not verified")).toBeVisible();
  await expect(card.locator('[data-record="dkim"]')).toContainText(`herald._domainkey.${domain}`);
  herald("admin", "verify-domain", "--workspace", slug, "--domain", domain);
  await gotoHydrated(page, "/settings/domains");
  await expect(card.getByText("Verified by an operator")).toBeVisible();
}

/** Drops `tulips.png` from the test fixtures onto `target`, as a file dragged from the desktop. */
export async function dropImage(page: Page, target: Locator, name = "tulips.png"): Promise<void> {
  const base64 = readFileSync(join(__dirname, "../fixtures/tulips.png")).toString("base64");
  const dataTransfer = await page.evaluateHandle(
    ({ base64, name }) => {
      const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([bytes], name, { type: "image/png" }));
      return transfer;
    },
    { base64, name },
  );
  await target.dispatchEvent("dragover", { dataTransfer });
  await target.dispatchEvent("drop", { dataTransfer });
}
