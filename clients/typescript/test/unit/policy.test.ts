/**
 * The error and retry tables, held to their one source: docs/openapi.json (its
 * envelope's types and `x-degrau-retry`, which both clients generate from; the
 * Python client's tests/test_policy.py holds it to the same). The generated
 * src/retry-policy.ts must be what scripts/generate-policy.mjs makes of the current
 * document, and the client must behave as the table says, type by type.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";

import { DegrauError, ERROR_CLASSES, ERROR_TYPES, RETRY_POLICY, type ErrorType } from "../../src/index.js";
import { envelope, fakeClient } from "./fake.js";

/** clients/typescript, from dist/test/unit/. */
const PACKAGE = fileURLToPath(new URL("../../../", import.meta.url));
const DOCUMENT = JSON.parse(readFileSync(`${PACKAGE}../../docs/openapi.json`, "utf8"));
const POLICY = DOCUMENT["x-degrau-retry"] as {
  max_retries: number;
  error_types: Record<string, boolean>;
  statuses_without_envelope: number[];
};
/** The status of each type, from the document's responses (`x-error-types`). */
const STATUS: Record<string, number> = {};
for (const [status, response] of Object.entries(DOCUMENT.paths["/v1/contacts/{contact}/context"].get.responses)) {
  if (status === "200") continue;
  const name = (response as { $ref: string }).$ref.split("/").pop()!;
  for (const type of DOCUMENT.components.responses[name]["x-error-types"]) STATUS[type] = Number(status);
}

const CONTEXT = { session: 1, head: "h1", opens_session: true, system: [], messages: [], cache_control: { type: "ephemeral" } };

describe("the one retry policy", () => {
  it("src/retry-policy.ts is generated from the current docs/openapi.json", async () => {
    const { generate } = (await import(`${PACKAGE}scripts/generate-policy.mjs`)) as { generate(doc: unknown): string };
    const committed = readFileSync(`${PACKAGE}src/retry-policy.ts`, "utf8");
    assert.ok(generate(DOCUMENT) === committed, "src/retry-policy.ts is stale: run `npm run generate` in clients/typescript");
  });

  it("names every documented type, with its class, status and decision", () => {
    const documented = DOCUMENT.components.schemas.Error.properties.error.properties.type.enum as string[];
    assert.deepEqual([...ERROR_TYPES], documented);
    assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), [...documented].sort());
    assert.deepEqual(Object.keys(STATUS).sort(), [...documented].sort());
    assert.deepEqual(Object.keys(RETRY_POLICY.error_types).sort(), [...documented].sort());
    const { description: _, ...policy } = DOCUMENT["x-degrau-retry"];
    assert.deepEqual(JSON.parse(JSON.stringify(RETRY_POLICY)), policy);
  });

  for (const type of ERROR_TYPES) {
    const retried = POLICY.error_types[type];
    it(`${retried ? "retries" : "does not retry"} ${type} as the policy says`, async () => {
      const { client, seen } = fakeClient([{ status: STATUS[type]!, body: envelope(type) }, { status: 200, body: CONTEXT }]);
      if (retried) {
        assert.equal((await client.context("ana")).head, "h1");
        assert.equal(seen.length, 2);
      } else {
        await assert.rejects(client.context("ana"), ERROR_CLASSES[type as ErrorType]);
        assert.equal(seen.length, 1);
      }
    });
  }

  for (const status of [400, 401, 403, 404, 409, 429, 500, 502, 503, 504]) {
    const retried = POLICY.statuses_without_envelope.includes(status);
    it(`${retried ? "retries" : "does not retry"} a ${status} that is not degrau's envelope`, async () => {
      const { client, seen } = fakeClient([
        { status, body: { message: "Service Unavailable" } },
        { status: 200, body: CONTEXT },
      ]);
      if (retried) await client.context("ana");
      else await assert.rejects(client.context("ana"), DegrauError);
      assert.equal(seen.length, retried ? 2 : 1);
    });
  }

  it("tries at most the policy's retries", async () => {
    const { client, seen } = fakeClient([{ status: 503, body: envelope("unavailable") }]);
    await assert.rejects(client.context("ana"));
    assert.equal(seen.length, 1 + POLICY.max_retries);
  });
});
