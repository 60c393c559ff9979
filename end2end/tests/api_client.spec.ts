// The API as a generated client sees it: `scripts/test.sh` generates a TypeScript client from
// the served OpenAPI document with @hey-api/openapi-ts (after openapi-spec-validator passes it),
// and an application uses that client alone to create a list, a reader and a campaign, send it
// and read its stats. A document a generator refuses, or one whose names or parameters are wrong,
// fails here.
import { test, expect, uniqueEmail, uniqueId, signUpWithWorkspace, gotoHydrated, setUpSender, mailedLink } from "./helpers";
import { createClient } from "../generated/herald-api/client";
import {
  createList,
  createReader,
  createCampaign,
  sendCampaign,
  getCampaignStats,
  getWorkspace,
  listLists,
} from "../generated/herald-api/sdk.gen";

test("a client generated from the OpenAPI document sends a campaign", async ({ page, baseURL }) => {
  test.setTimeout(120_000);
  await signUpWithWorkspace(page, uniqueEmail("client-author"), `Client ${uniqueId()}`);
  await setUpSender(page);
  await gotoHydrated(page, "/settings/api-keys");
  await page.locator("#key-name").fill("Generated client");
  await page.getByRole("button", { name: "Create key" }).click();
  const key = (await page.getByTestId("new-api-key").textContent())?.trim() ?? "";
  expect(key).toMatch(/^hrld_/);

  const client = createClient({ baseUrl: baseURL, auth: key });
  const workspace = await getWorkspace({ client });
  expect(workspace.response.status).toBe(200);

  const list = await createList({
    client,
    body: { name: `Generated ${uniqueId()}`, opt_in: "single" },
    headers: { "Idempotency-Key": `list-${uniqueId()}` },
  });
  expect(list.response.status, JSON.stringify(list.error)).toBe(201);
  const listId = list.data!.id;
  const lists = await listLists({ client });
  expect(lists.data!.map((l) => l.id)).toContain(listId);

  const email = uniqueEmail("client-reader");
  const reader = await createReader({ client, body: { email, name: "Gen", lists: [listId] } });
  expect(reader.response.status, JSON.stringify(reader.error)).toBe(201);

  const campaign = await createCampaign({
    client,
    body: { name: "From the generated client", subject: "Hello {{ reader.name }}", list_ids: [listId], body: "Hi there" },
  });
  expect(campaign.response.status, JSON.stringify(campaign.error)).toBe(201);
  const id = campaign.data!.id;

  const sent = await sendCampaign({ client, path: { id } });
  expect(sent.response.status, JSON.stringify(sent.error)).toBe(200);
  await expect
    .poll(async () => (await getCampaignStats({ client, path: { id } })).data?.status, { timeout: 60_000 })
    .toBe("sent");
  const stats = await getCampaignStats({ client, path: { id } });
  expect(stats.data!.sent).toBe(1);
  // And the reader has it (with its unsubscribe link, as every campaign mail).
  expect(await mailedLink(page, email, /https?:\/\/\S+/)).toMatch(/^http/);

  // An unknown id is the API's 404, typed as its error.
  const missing = await getCampaignStats({ client, path: { id: "00000000-0000-0000-0000-000000000000" } });
  expect(missing.response.status).toBe(404);
  expect((missing.error as { code?: string } | undefined)?.code).toBe("not_found");
});
