/** The stack tests' check of every answer against docs/openapi.json can fail. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { check } from "../stack/openapi.js";

const notFound = JSON.stringify({ error: { type: "not_found", message: "no such contact" } });

test("an answer the document describes passes", () => {
  check("GET", "/v1/contacts/ana/memory", 404, notFound);
  check("GET", "/v1/nope", 404, notFound);
});

test("an answer the document does not describe fails", () => {
  assert.throws(() => check("GET", "/v1/contacts/ana/memory", 404, '{"error": {"kind": "x"}}'), /does not fit its schema/);
  assert.throws(() => check("GET", "/v1/contacts/ana/memory", 418, ""), /a status it does not list/);
  assert.throws(() => check("GET", "/v1/nope", 200, "{}"), /not in docs\/openapi.json/);
  assert.throws(
    () => check("DELETE", "/v1/contacts/ana", 200, JSON.stringify({ erased: true, items: -1 })),
    /does not fit its schema/,
  );
});
