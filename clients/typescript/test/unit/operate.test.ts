/**
 * The operator methods offline: each sends the request `docs/openapi.json`
 * describes and returns its documented answer (the document's own example, held
 * to its schema by the stack tests' `check`); the dev scopes and operator are
 * headers; `iterContacts` reads the pages as it reaches them.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";

import { check } from "../stack/openapi.js";
import { fakeClient } from "./fake.js";

type Json = Record<string, unknown>;

const DOCUMENT = JSON.parse(readFileSync(fileURLToPath(new URL("../../../../../docs/openapi.json", import.meta.url)), "utf8")) as {
  paths: Record<string, Record<string, Json>>;
};

/** The 200 example the document gives for an operation, checked against its schema. */
function example(operationId: string): unknown {
  for (const [path, methods] of Object.entries(DOCUMENT.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      if (operation.operationId !== operationId) continue;
      const ok = (operation.responses as Record<string, Json>)["200"]!;
      const content = ok.content as Record<string, { examples: Record<string, { value: unknown }> }>;
      const value = Object.values(content["application/json"]!.examples)[0]!.value;
      check(method.toUpperCase(), path.replace(/\{[^}]+\}/g, "x"), 200, JSON.stringify(value));
      return value;
    }
  }
  throw new Error(`no operation ${operationId}`);
}

describe("operator routes", () => {
  it("each method sends the documented request and returns the documented answer", async () => {
    const operations = ["listContacts", "listFacts", "putFact", "deleteFact", "getTenantConfig", "putTenantConfig", "getUsage"];
    const { client, seen } = fakeClient(operations.map((id) => ({ status: 200, body: example(id) })));
    const contact = "+5511900000000";
    assert.deepEqual(await client.listContacts({ limit: 5, cursor: "c1" }), example("listContacts"));
    assert.deepEqual(await client.listFacts(contact), (example("listFacts") as { facts: unknown }).facts);
    assert.deepEqual(await client.putFact(contact, "preferred_professional", "Rita"), example("putFact"));
    assert.deepEqual(await client.deleteFact(contact, "preferred_professional"), example("deleteFact"));
    assert.deepEqual(await client.getTenantConfig(), example("getTenantConfig"));
    const config = { allowed_fact_keys: ["name"], session_idle_minutes: 720 };
    assert.deepEqual(await client.putTenantConfig(config, '"v3"'), example("putTenantConfig"));
    assert.deepEqual(
      await client.getUsage({ from: new Date(Date.UTC(2026, 10, 27, 23, 59)), to: "2026-12-03" }),
      example("getUsage"),
    );
    const path = "/v1/contacts/%2B5511900000000";
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.url.pathname}${s.url.search}`),
      [
        "GET /v1/contacts?limit=5&cursor=c1",
        `GET ${path}/facts`,
        `PUT ${path}/facts/preferred_professional`,
        `DELETE ${path}/facts/preferred_professional`,
        "GET /v1/tenant/config",
        "PUT /v1/tenant/config",
        "GET /v1/usage?from=2026-11-27&to=2026-12-03",
      ],
    );
    assert.deepEqual(JSON.parse(seen[2]!.body), { value: "Rita" });
    assert.equal(seen[2]!.headers.get("content-type"), "application/json");
    assert.deepEqual(JSON.parse(seen[5]!.body), config);
    assert.deepEqual(
      seen.map((s) => s.headers.get("if-match")),
      [null, null, null, null, null, '"v3"', null],
      "only the conditional change carries If-Match",
    );
  });

  it("sends the dev scopes and operator only when given", async () => {
    const listed = { status: 200, body: { contacts: [], next_cursor: null } };
    const asList = fakeClient([listed], { scopes: ["memory:read", "tenant:admin"], operator: "ops-7" });
    await asList.client.listContacts();
    assert.equal(asList.seen[0]!.headers.get("x-scopes"), "memory:read tenant:admin");
    assert.equal(asList.seen[0]!.headers.get("x-operator"), "ops-7");
    assert.equal(asList.seen[0]!.headers.get("x-tenant-id"), "acme");
    const asString = fakeClient([listed], { scopes: "memory:write" });
    await asString.client.listContacts();
    assert.equal(asString.seen[0]!.headers.get("x-scopes"), "memory:write");
    const plain = fakeClient([listed]);
    await plain.client.listContacts();
    assert.equal(plain.seen[0]!.headers.get("x-scopes"), null);
    assert.equal(plain.seen[0]!.headers.get("x-operator"), null);
  });

  it("iterContacts reads the next page only when the iteration reaches it", async () => {
    const summary = (contact: string) => ({ contact, session: 1, last_activity: 1767225600, messages: 2, facts: 0 });
    const { client, seen } = fakeClient([
      { status: 200, body: { contacts: [summary("ana"), summary("bea")], next_cursor: "p2" } },
      { status: 200, body: { contacts: [summary("cid")], next_cursor: null } },
    ]);
    const contacts = client.iterContacts({ limit: 2 });
    assert.equal((await contacts.next()).value?.contact, "ana");
    assert.equal(seen.length, 1);
    const rest: string[] = [];
    for await (const c of contacts) rest.push(c.contact);
    assert.deepEqual(rest, ["bea", "cid"]);
    assert.deepEqual(
      seen.map((s) => s.url.search),
      ["?limit=2", "?limit=2&cursor=p2"],
    );
  });
});
