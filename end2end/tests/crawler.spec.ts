// The crawler: every page the app declares, with data in every state, loaded directly at a phone
// width and a desktop width, then reloaded and reached client-side. A page fails on any console
// error, uncaught exception, failed request (4xx/5xx or a network error), horizontal overflow,
// a control too small for a finger or cut off, or a critical or serious accessibility
// violation (axe-core); after its direct load one control must work (which needs the page to
// have hydrated).
//
// The route list comes from the app itself (`herald dev routes`), and the data from
// `herald admin seed-states` (both through HERALD_E2E_CLI, which scripts/test.sh points at the
// server's binary with the server's settings). A route the crawler cannot reach fails the test:
// a new page must be added to the seed (parameterised routes) or to PUBLIC below.
import AxeBuilder from "@axe-core/playwright";
import type { Browser, BrowserContext, Page } from "@playwright/test";
import { test, expect, gotoHydrated, herald, instrument, signUpWithWorkspace, uniqueEmail, uniqueId, waitForHydration } from "./helpers";

const CLI = process.env.HERALD_E2E_CLI;

/** The app's page routes, `{id}` written `:id`, "" written "/". */
function appRoutes(): string[] {
  if (!CLI) return [];
  return herald("dev", "routes")
    .split("\n")
    .map((r) => r.trim())
    .filter((r) => r.length > 0)
    .map((r) => r.replace(/\{([^}]+)\}/g, ":$1"))
    .map((r) => (r === "" ? "/" : r));
}

/** Pages for visitors without a session (the rest need one). */
const PUBLIC = new Set([
  "/login",
  "/login/two-factor",
  "/signup",
  "/signup/finish",
  "/forgot-password",
  "/reset-password",
  "/verify-email",
  "/invite/:token",
]);

const WIDTHS = [
  { name: "phone", width: 390, height: 844 },
  { name: "desktop", width: 1280, height: 900 },
];

type Paths = Record<string, string[]>;

interface Watch {
  problems: string[];
  /** Server-function calls sent and not yet answered. */
  inflight: number;
}

/** Everything the browser reports that means the page is broken. */
function watch(page: Page): Watch {
  const w: Watch = { problems: [], inflight: 0 };
  const rpc = (url: string) => new URL(url).pathname.startsWith("/rpc/");
  page.on("request", (r) => {
    if (rpc(r.url())) w.inflight += 1;
  });
  for (const done of ["requestfinished", "requestfailed"] as const) {
    page.on(done, (r) => {
      if (rpc(r.url())) w.inflight = Math.max(0, w.inflight - 1);
    });
  }
  page.on("pageerror", (e) => w.problems.push(`uncaught ${e.name}: ${e.message}`));
  page.on("console", (m) => {
    // The test's own hydration probe (an init script) is injected into every frame; the email
    // previews' sandboxed frames refuse it, as they must refuse any script.
    const sandboxRefusedProbe = /Blocked script execution in 'about:srcdoc' because the document's frame is sandboxed/;
    if (m.type() === "error" && !sandboxRefusedProbe.test(m.text())) w.problems.push(`console error: ${m.text()}`);
  });
  page.on("requestfailed", (r) => {
    const failure = r.failure()?.errorText ?? "";
    // Leaving a page aborts its pending fetches; that is not a failure of the page.
    if (!/ERR_ABORTED|NS_BINDING_ABORTED/.test(failure)) w.problems.push(`request failed: ${r.url()} ${failure}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400) w.problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
  });
  return w;
}

/** What a Suspense shows while its data is on the way (the app's fallbacks). */
const PENDING = ["Loading…", "Loading lists…", "Rendering…", "Counting…"];

/**
 * Waits until the page shows what it promised: no fallback still visible and no server-function
 * call unanswered. Not "network idle", which a page that polls may never reach on a busy machine.
 */
async function settled(page: Page, w: Watch, what: string): Promise<void> {
  await expect
    .poll(
      async () => {
        if (w.inflight > 0) return `${w.inflight} server-function call(s) unanswered`;
        const pending = await page
          .evaluate((texts) => {
            return Array.from(document.querySelectorAll("body *"))
              .filter((el) => el.children.length === 0 && texts.includes((el.textContent ?? "").trim()))
              .filter((el) => (el as HTMLElement).offsetParent !== null)
              .map((el) => (el.textContent ?? "").trim());
          }, PENDING)
          // A navigation replaced the document while we looked: look again.
          .catch(() => ["(navigating)"]);
        return pending.length ? `still showing ${pending.join(", ")}` : "settled";
      },
      // Short steps: with the default back-off a page that settles in 1.1 s is seen at 1.85 s.
      { message: `${what}: the page never settled`, timeout: 60_000, intervals: [50, 100, 250] },
    )
    .toBe("settled");
}

async function expectClean(page: Page, w: Watch, what: string): Promise<void> {
  // Late errors (a resource failing after hydration) show up within a moment.
  await page.waitForTimeout(150);
  const problems = w.problems.splice(0);
  expect(problems, `${what}: errors reported by the browser`).toEqual([]);
}

async function expectNoOverflow(page: Page, what: string): Promise<void> {
  const overflow = await page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth <= width + 1) return null;
    // Name the outermost elements that stick out, to say what to fix.
    const culprits: string[] = [];
    for (const el of Array.from(document.querySelectorAll("body *"))) {
      const r = el.getBoundingClientRect();
      if (r.right > width + 1 && culprits.length < 5 && !culprits.some((c) => el.parentElement?.closest(c))) {
        const id = el.getAttribute("data-testid");
        // Classes escaped: Tailwind's `hover:underline` is not a valid selector as written.
        const classes = String(el.className).split(" ").filter((c) => c.length > 0).map((c) => "." + CSS.escape(c)).join("");
        culprits.push(id ? `[data-testid="${id}"]` : `${el.tagName.toLowerCase()}${classes}`);
      }
    }
    // No box sticks out: then text overflows the box it is in (a long word in a block).
    if (culprits.length === 0) {
      for (const el of Array.from(document.querySelectorAll("body *"))) {
        const box = el as HTMLElement;
        const spills = box.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX === "visible";
        if (spills && box.getBoundingClientRect().left + box.scrollWidth > width + 1 && culprits.length < 5) {
          const text = (box.textContent ?? "").trim().slice(0, 30);
          culprits.push(`${box.tagName.toLowerCase()} "${text}" (its text)`);
        }
      }
    }
    return { scrollWidth: document.documentElement.scrollWidth, width, culprits };
  });
  expect(overflow, `${what}: the page is wider than the screen`).toBeNull();
}

/**
 * Usable on a phone, at every width: text inputs and selects at least 120 px wide
 * (a 26 px name field with its label over it is not a field), tap targets at least 44 × 44 px
 * (buttons, links styled as buttons, checkboxes and radios through their label), no text cut
 * inside a button, and each table's first two columns and its action on the screen.
 * Soft: every broken rule of every page is reported in one run.
 */
async function expectUsableControls(page: Page, what: string): Promise<void> {
  const problems = await page.evaluate(() => {
    const found: string[] = [];
    const width = document.documentElement.clientWidth;
    const shown = (el: Element): boolean => {
      const r = el.getBoundingClientRect();
      const s = getComputedStyle(el);
      // `sr-only` (clipped to nothing) is for screen readers, not fingers.
      const clipped = s.clipPath === "inset(50%)" && r.width <= 1;
      return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && !clipped && !el.closest("[hidden], [aria-hidden=true], details:not([open]) > :not(summary), .sr-only");
    };
    const name = (el: Element): string => {
      const label = el.getAttribute("aria-label") ?? el.getAttribute("data-testid") ?? (el.id ? `#${el.id}` : "");
      const text = (el.textContent ?? "").trim().replace(/\s+/g, " ").slice(0, 40);
      return `<${el.tagName.toLowerCase()}> ${label || `"${text}"`}`;
    };
    const px = (n: number) => Math.round(n);
    // Text fields and selects.
    const textTypes = ["text", "email", "search", "url", "tel", "password", "number", "date", "time", "datetime-local", ""];
    for (const el of Array.from(document.querySelectorAll("input, select, textarea"))) {
      if (el instanceof HTMLInputElement && !textTypes.includes(el.getAttribute("type") ?? "")) continue;
      if (!shown(el)) continue;
      const r = el.getBoundingClientRect();
      if (r.width < 120) found.push(`${name(el)} is ${px(r.width)} px wide (at least 120)`);
    }
    // Tap targets: what is clicked, or for a checkbox or radio, its label.
    const targets = new Set<Element>();
    for (const el of Array.from(document.querySelectorAll("button, [role=button], a[class*=btn], summary, input[type=checkbox], input[type=radio], input[type=file]"))) {
      const input = el instanceof HTMLInputElement ? el : null;
      // A label hidden for screen readers only leaves the control itself to tap.
      const label = input ? Array.from(input.labels ?? []).find(shown) : undefined;
      const target = label ?? el;
      if (shown(target)) targets.add(target);
    }
    for (const el of targets) {
      const r = el.getBoundingClientRect();
      if (r.width < 43.5 || r.height < 43.5) found.push(`${name(el)} is ${px(r.width)} × ${px(r.height)} px (at least 44 × 44)`);
    }
    // Text cut inside a button or a select's chosen option.
    for (const el of Array.from(document.querySelectorAll("button, a[class*=btn]"))) {
      if (shown(el) && el.scrollWidth > el.clientWidth + 1) found.push(`${name(el)} cuts its text (${el.scrollWidth} px in ${el.clientWidth})`);
    }
    for (const el of Array.from(document.querySelectorAll("select"))) {
      if (!(el instanceof HTMLSelectElement) || !shown(el)) continue;
      const chosen = el.selectedOptions[0]?.text ?? "";
      const probe = document.createElement("span");
      const s = getComputedStyle(el);
      probe.style.cssText = `position:absolute;visibility:hidden;white-space:pre;font:${s.font};`;
      probe.textContent = chosen;
      document.body.appendChild(probe);
      const needed = probe.getBoundingClientRect().width;
      probe.remove();
      const room = el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
      // All of the chosen text, or at least 160 px of it (a long workspace name may end early;
      // a time zone shown as "U" may not).
      if (room + 1 < Math.min(needed, 160)) found.push(`${name(el)} shows "${chosen.slice(0, 30)}" in ${px(room)} px`);
    }
    // Tables: the first two columns and the action on the screen, without scrolling sideways.
    for (const table of Array.from(document.querySelectorAll("main table"))) {
      if (!shown(table)) continue;
      const row = table.querySelector("tbody tr") ?? table.querySelector("tr");
      if (!row) continue;
      const cells = Array.from(row.children).filter(shown);
      const action = cells.findLast((c) => c.querySelector("a, button"));
      for (const cell of [cells[0], cells[1], action]) {
        if (!cell) continue;
        const r = cell.getBoundingClientRect();
        let clip = { left: 0, right: width };
        for (let p = cell.parentElement; p && p !== document.body; p = p.parentElement) {
          if (/(auto|scroll|hidden)/.test(getComputedStyle(p).overflowX)) {
            const b = p.getBoundingClientRect();
            clip = { left: Math.max(clip.left, b.left), right: Math.min(clip.right, b.right) };
          }
        }
        if (r.left < clip.left - 1 || r.right > clip.right + 1) {
          found.push(`table ${table.getAttribute("data-testid") ?? ""}: "${(cell.textContent ?? "").trim().slice(0, 30)}" is off the screen (${px(r.left)}–${px(r.right)} px of ${px(clip.left)}–${px(clip.right)})`);
        }
      }
    }
    return found;
  });
  expect.soft(problems, `${what}: controls too small, cut or off the screen`).toEqual([]);
}

async function expectAccessible(page: Page, what: string): Promise<void> {
  // The sandboxed frames are left out: they hold tenants' emails, not Herald's UI, and axe
  // cannot run scripts in them (it waited on them until the test timed out).
  const analysis = new AxeBuilder({ page })
    .withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"])
    .exclude("iframe[sandbox]")
    .analyze();
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`${what}: axe did not finish within 60 s`)), 60_000),
  );
  const results = await Promise.race([analysis, timeout]);
  // Serious as well as critical: grey hint text without enough contrast is serious.
  const serious = results.violations
    .filter((v) => v.impact === "critical" || v.impact === "serious")
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")})`);
  expect.soft(serious, `${what}: critical or serious accessibility violations`).toEqual([]);
}

/** After a direct load: a control that only works once the page has hydrated. */
async function probe(page: Page, route: string, path: string): Promise<void> {
  if (route === "/signup") {
    // The answer replaces the form in place (without the front end it would be a new page).
    await page.getByLabel("Email", { exact: true }).fill(uniqueEmail("crawler-probe"));
    await page.getByRole("button", { name: "Create account" }).click();
    await expect(page.getByTestId("signup-sent")).toContainText("Check your inbox");
    return;
  }
  if (route === "/signup/finish") {
    const password = page.getByLabel("Password", { exact: true });
    await password.fill("a long enough passphrase");
    await expect(page.locator("#password-rules")).toHaveText("✓ At least 10 characters");
    return;
  }
  if (route === "/login") {
    await expect(page.getByRole("button", { name: "Log in" })).toBeEnabled();
    return;
  }
  if (route === "/invite/:token") {
    await expect(page.getByText("invited@example.com")).toBeVisible();
    return;
  }
  if (route === "/campaigns/:id" && (await page.getByTestId("save-status").count()) > 0) {
    // The editor's settings view: its Content tab (a signal) shows the message's fields.
    if (new URL(page.url()).searchParams.get("tab") === "settings") {
      await page.getByRole("tab", { name: "Content" }).click();
      await expect(page.getByLabel("Name", { exact: true })).toBeVisible();
    }
    // The editor: typing renames the campaign in its heading at once (a signal, not a reload).
    const name = page.getByLabel("Name", { exact: true });
    if (await name.isEditable()) {
      await name.fill("Renamed by the crawler");
      await expect(page.getByRole("heading", { level: 1 })).toHaveText("Renamed by the crawler");
      // Leaving the field saves it (autosave), and the preview renders.
      await page.getByLabel("Subject", { exact: true }).focus();
      await expect(page.getByTestId("save-status")).toContainText("Saved");
      // On a phone the preview is a view of its own.
      const previewTab = page.getByRole("tab", { name: "Preview & send" });
      if (await previewTab.isVisible()) await previewTab.click();
      await expect(page.getByTestId("preview-frame")).toBeVisible();
      return;
    }
  }
  if (route === "/audience/imports/:id" && (await page.getByTestId("import-preview").count()) > 0) {
    // The mapping step: choosing a list fills the hidden field the Start button submits.
    await page.getByRole("checkbox", { name: "Newsletter" }).check();
    await expect(page.locator('input[name="lists"]')).not.toHaveValue("");
    return;
  }
  // Every page in the shell: a sidebar link navigates client-side (no document load), which
  // only the hydrated router does.
  if (!PUBLIC.has(route) && route !== "/workspaces/new") {
    await page.evaluate(() => ((window as unknown as { __crawlerMark?: number }).__crawlerMark = 1));
    const menu = page.getByRole("button", { name: "Menu" });
    if (await menu.isVisible()) await menu.click();
    const target = path.startsWith("/settings") ? "Campaigns" : "Settings";
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: target, exact: true }).click();
    await expect(page).toHaveURL(target === "Settings" ? /\/settings$/ : /\/campaigns$/);
    expect(await page.evaluate(() => (window as unknown as { __crawlerMark?: number }).__crawlerMark)).toBe(1);
  }
}

/** A client-side navigation to `path`: a link added to the current page, clicked. */
async function navigateClientSide(page: Page, w: Watch, path: string): Promise<void> {
  await page.evaluate((href) => {
    (window as unknown as { __crawlerMark?: number }).__crawlerMark = 2;
    const a = document.createElement("a");
    a.href = href;
    a.textContent = "crawler";
    a.id = "crawler-link";
    document.querySelector("main")?.appendChild(a);
  }, path);
  await page.locator("#crawler-link").click();
  await expect(page).toHaveURL(new RegExp(`${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`));
  await settled(page, w, `${path}, client-side navigation`);
  expect(await page.evaluate(() => (window as unknown as { __crawlerMark?: number }).__crawlerMark), "a document load instead of client-side navigation").toBe(2);
}

/**
 * With HERALD_CRAWLER_TIMINGS set, prints how long each step of a visit took, to see where the
 * crawler's minutes go.
 */
function stopwatch(what: string): (step: string) => void {
  let last = Date.now();
  return (step) => {
    const now = Date.now();
    if (process.env.HERALD_CRAWLER_TIMINGS) console.log(`${what}: ${step} ${now - last} ms`);
    last = now;
  };
}

const routes = appRoutes();

// Not serial: a failing route does not hide the others (the worker restarts and seeds again).
// Parallel: its routes are shared out among the workers (each signs up and seeds a workspace
// of its own in `beforeAll`), so the longest file does not run on one worker while the others
// wait.
test.describe("crawler", () => {
  test.describe.configure({ mode: "parallel" });
  let owner: BrowserContext;
  let visitor: BrowserContext;
  let paths: Paths = {};

  test.beforeAll(async ({ browser }: { browser: Browser }) => {
    test.setTimeout(120_000);
    const baseURL = test.info().project.use.baseURL;
    owner = await browser.newContext({ baseURL });
    visitor = await browser.newContext({ baseURL });
    const problems: string[] = [];
    await instrument(owner, problems);
    await instrument(visitor, problems);
    const page = await owner.newPage();
    const email = uniqueEmail("crawler");
    await signUpWithWorkspace(page, email, `Crawler ${uniqueId()}`);
    paths = JSON.parse(herald("admin", "seed-states", "--owner", email)) as Paths;
    await page.close();
  });

  test.afterAll(async () => {
    await owner?.close();
    await visitor?.close();
  });

  test("the crawler knows every route of the app", () => {
    expect(routes.length, "`herald dev routes` listed no routes").toBeGreaterThan(10);
    const unknown = routes.filter((r) => r.includes(":") && !(paths[r]?.length > 0));
    expect(unknown, "routes with no seeded path: add them to `herald admin seed-states`").toEqual([]);
  });

  // The readers' hosted pages (subscribe, unsubscribe and preferences) are the server's, not
  // the app's routes: walked here with the seeded long names, which must wrap on a phone.
  test("the readers' public pages", async () => {
    test.setTimeout(240_000);
    const pages = paths["public"] ?? [];
    expect(pages.length, "`herald admin seed-states` gave no public pages").toBeGreaterThan(2);
    for (const size of WIDTHS) {
      for (const path of pages) {
        const what = `${path.slice(0, 40)} at ${size.width} px`;
        const page = await visitor.newPage();
        await page.setViewportSize({ width: size.width, height: size.height });
        const w = watch(page);
        await page.goto(path);
        await expect(page.locator("main")).toBeVisible();
        await expect(page.getByText("GardenersQuarterly").first()).toBeVisible();
        await expectClean(page, w, what);
        await expectNoOverflow(page, what);
        await expectUsableControls(page, what);
        await expectAccessible(page, what);
        await page.close();
      }
    }
  });

  for (const route of routes) {
    test(`route ${route}`, async () => {
      test.setTimeout(480_000);
      const context = PUBLIC.has(route) ? visitor : owner;
      // A route without parameters may still need data in its query (a link's token).
      const concrete = paths[route]?.length ? paths[route] : route.includes(":") ? [] : [route];
      expect(concrete.length, `no path to crawl for ${route}`).toBeGreaterThan(0);
      for (const size of WIDTHS) {
        for (const path of concrete) {
          const what = `${path} at ${size.width} px`;
          const page = await context.newPage();
          await page.setViewportSize({ width: size.width, height: size.height });
          const w = watch(page);
          const clock = stopwatch(what);
          // Direct load, at both widths: what a page shows depends on the width.
          await gotoHydrated(page, path);
          await settled(page, w, `${what}, direct load`);
          await expectClean(page, w, `${what}, direct load`);
          await expectNoOverflow(page, what);
          await expectUsableControls(page, what);
          clock("direct load");
          await expectAccessible(page, what);
          clock("axe");
          // Reload and client-side navigation, once per path: neither depends on the width (the
          // client renders what the server rendered, or hydration reports it), so each is done
          // at one of the two.
          if (size.name === "desktop") {
            await page.reload();
            await waitForHydration(page);
            await settled(page, w, `${what}, reload`);
            await expectClean(page, w, `${what}, reload`);
            clock("reload");
          }
          // One control works.
          await probe(page, route, path);
          await expectClean(page, w, `${what}, after using a control`);
          clock("probe");
          // Client-side: from another page of the same kind, to this one; at the phone's width,
          // where a page that renders differently client-side would overflow first.
          if (size.name === "phone" && !PUBLIC.has(route) && route !== "/workspaces/new") {
            await gotoHydrated(page, "/");
            await navigateClientSide(page, w, path);
            await expectClean(page, w, `${what}, client-side navigation`);
            await expectNoOverflow(page, `${what} (client-side)`);
            clock("client-side");
          }
          await page.close();
        }
      }
    });
  }
});
