/**
 * The operator routes on the local stack: the tenant configuration under
 * If-Match (412 stale, 428 without), contacts, facts with provenance and history,
 * a refused value (400 that does not quote it), usage, and 403 without the scope.
 */

import assert from "node:assert/strict";
import { before, it } from "node:test";

import { Forbidden, InvalidRequest, PreconditionFailed } from "../../src/index.js";
import { checkedFetch } from "./openapi.js";
import { API, client, freshTenant, operator, requireStack } from "./stack.js";

before(requireStack);

const today = () => new Date().toISOString().slice(0, 10);

it("the tenant configuration changes only under the current If-Match", async () => {
  const tenant = freshTenant();
  const admin = operator(tenant, ["tenant:admin"]);
  const stored = await admin.getTenantConfig();
  assert.deepEqual([stored.config, stored.etag, stored.valid], [null, '"v0"', true]);
  const config = { allowed_fact_keys: ["name", "preferred_professional"], session_idle_minutes: 720 };
  const changed = await admin.putTenantConfig(config, stored.etag);
  assert.deepEqual([changed.config, changed.etag, changed.valid], [config, '"v1"', true]);
  await assert.rejects(admin.putTenantConfig({ session_idle_minutes: 60 }, stored.etag), (e: unknown) => e instanceof PreconditionFailed && e.status === 412);
  const without = await checkedFetch(
    new Request(`${API}/v1/tenant/config`, {
      method: "PUT",
      headers: { "x-tenant-id": tenant, "x-scopes": "tenant:admin", "content-type": "application/json" },
      body: JSON.stringify({ session_idle_minutes: 60 }),
    }),
  );
  assert.equal(without.status, 428);
  assert.equal(((await without.json()) as { error: { type: string } }).error.type, "precondition_required");
  assert.deepEqual((await admin.getTenantConfig()).config, config, "neither refused change was stored");
});

it("contacts, facts with provenance and history, a refused value, and the day's usage", async () => {
  const tenant = freshTenant();
  const ops = operator(tenant, undefined, "ops-ts");
  const chat = client(tenant);
  await chat.sendMessage("ana", "Hi, I am Ana.");
  const contacts = [];
  for await (const c of ops.iterContacts({ limit: 1 })) contacts.push(c);
  assert.deepEqual(
    contacts.map((c) => [c.contact, c.messages]),
    [["ana", 2]],
  );
  const first = await ops.putFact("ana", "preferred_professional", "Rira");
  assert.deepEqual(first.set_by, { ...first.set_by, kind: "operator", by: "ops-ts" });
  const corrected = await ops.putFact("ana", "preferred_professional", "Rita");
  assert.deepEqual(
    corrected.history.map((h) => h.value),
    ["Rira"],
  );
  assert.deepEqual(await ops.listFacts("ana"), [corrected]);
  const refused = "diabetes, books early";
  await assert.rejects(ops.putFact("ana", "preferred_professional", refused), (e: unknown) => {
    assert.ok(e instanceof InvalidRequest && e.status === 400, String(e));
    assert.ok(!JSON.stringify(e.body).includes("diabetes"), `the 400 quotes the value: ${JSON.stringify(e.body)}`);
    return true;
  });
  assert.deepEqual(await ops.listFacts("ana"), [corrected], "the refused value changed nothing");
  assert.deepEqual(await ops.deleteFact("ana", "preferred_professional"), { deleted: true, key: "preferred_professional" });
  assert.deepEqual(await ops.listFacts("ana"), []);
  const usage = await ops.getUsage({ from: today(), to: today() });
  assert.equal(usage.days.length, 1);
  assert.equal(usage.days[0]!.rounds, 1);
});

it("each operator route needs its scope: 403, nothing changed", async () => {
  const tenant = freshTenant();
  await client(tenant).sendMessage("bea", "Hello, Bea here.");
  await operator(tenant).putFact("bea", "name", "Bea");
  const chat = client(tenant);
  const reader = operator(tenant, ["memory:read"]);
  for (const call of [
    () => chat.listContacts(),
    () => chat.listFacts("bea"),
    () => reader.putFact("bea", "name", "Beatriz"),
    () => reader.deleteFact("bea", "name"),
    () => reader.getTenantConfig(),
    () => reader.putTenantConfig({}, '"v0"'),
    () => reader.getUsage(),
  ]) {
    await assert.rejects(call(), (e: unknown) => e instanceof Forbidden && e.status === 403);
  }
  assert.deepEqual(
    (await reader.listFacts("bea")).map((f) => [f.key, f.value]),
    [["name", "Bea"]],
  );
});
