/** The client offline: what each method sends, and each error type as its class. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type Anthropic from "@anthropic-ai/sdk";

import * as degrau from "../../src/index.js";
import { APIStatusError, DegrauError, ERROR_CLASSES, type ErrorType } from "../../src/index.js";
import { envelope, fakeClient } from "./fake.js";

/** The status each documented type comes with (docs/openapi.json's responses). */
const STATUS: Record<ErrorType, number> = {
  invalid_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  precondition_failed: 412,
  too_large: 413,
  unsupported_media_type: 415,
  idempotency_mismatch: 422,
  precondition_required: 428,
  rate_limited: 429,
  internal_error: 500,
  tenant_config_invalid: 500,
  model_error: 502,
  model_refused: 502,
  unavailable: 503,
  model_timeout: 504,
};

/** The exported class name of each type (as in the Python client). */
const CLASS_NAME: Record<ErrorType, string> = {
  invalid_request: "InvalidRequest",
  unauthenticated: "Unauthenticated",
  forbidden: "Forbidden",
  not_found: "NotFound",
  method_not_allowed: "MethodNotAllowed",
  conflict: "Conflict",
  precondition_failed: "PreconditionFailed",
  too_large: "TooLarge",
  unsupported_media_type: "UnsupportedMediaType",
  idempotency_mismatch: "IdempotencyMismatch",
  precondition_required: "PreconditionRequired",
  rate_limited: "RateLimited",
  internal_error: "InternalError",
  tenant_config_invalid: "TenantConfigInvalid",
  model_error: "ModelError",
  model_refused: "ModelRefused",
  unavailable: "Unavailable",
  model_timeout: "ModelTimeout",
};

describe("errors", () => {
  for (const type of Object.keys(STATUS) as ErrorType[]) {
    it(`answers ${STATUS[type]} ${type} as ${CLASS_NAME[type]}`, async () => {
      const { client } = fakeClient([{ status: STATUS[type], body: envelope(type, `why ${type}`), headers: { "retry-after": "4" } }], {
        retries: 0,
      });
      const error = await client.context("ana").then(
        () => assert.fail("resolved"),
        (e: unknown) => e,
      );
      const ErrorClass = (degrau as unknown as Record<string, new (...args: never[]) => APIStatusError>)[CLASS_NAME[type]]!;
      assert.ok(error instanceof ErrorClass, `${String(error)} is a ${CLASS_NAME[type]}`);
      assert.ok(error instanceof APIStatusError && error instanceof DegrauError);
      assert.ok(error instanceof Error);
      assert.equal(error.name, CLASS_NAME[type]);
      assert.equal(error.status, STATUS[type]);
      assert.equal(error.type, type);
      assert.equal(error.message, `why ${type}`);
      assert.equal(error.retryAfter, 4);
      assert.deepEqual(error.body, envelope(type, `why ${type}`));
    });
  }

  it("has one class per type, each its own", () => {
    const classes = Object.values(ERROR_CLASSES);
    assert.equal(new Set(classes).size, classes.length);
    assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), Object.keys(STATUS).sort());
  });

  it("answers what is not the envelope (API Gateway's 401) as an APIStatusError of type unknown", async () => {
    const { client } = fakeClient([{ status: 401, body: { message: "Unauthorized" } }]);
    const error = await client.memory("ana").then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof APIStatusError && error instanceof DegrauError);
    assert.equal(error.constructor, APIStatusError);
    assert.equal(error.type, "unknown");
    assert.equal(error.status, 401);
    assert.deepEqual(error.body, { message: "Unauthorized" });
  });

  it("keeps a text body as the message", async () => {
    const { client } = fakeClient([{ status: 400, body: "not json at all" }]);
    await assert.rejects(client.memory("ana"), { type: "unknown", message: "not json at all", status: 400 });
  });
});

describe("requests", () => {
  it("sends the tenant, or the token, on every call", async () => {
    const withTenant = fakeClient([{ status: 200, body: {} }]);
    await withTenant.client.memory("ana");
    assert.equal(withTenant.seen[0]!.headers.get("x-tenant-id"), "acme");
    assert.equal(withTenant.seen[0]!.headers.get("authorization"), null);
    const withToken = fakeClient([{ status: 200, body: {} }], { tenant: undefined, token: "t0k" });
    await withToken.client.memory("ana");
    assert.equal(withToken.seen[0]!.headers.get("authorization"), "Bearer t0k");
    assert.equal(withToken.seen[0]!.headers.get("x-tenant-id"), null);
  });

  it("puts each method on its route, the contact percent-encoded", async () => {
    const { client, seen } = fakeClient([{ status: 200, body: {} }]);
    const contact = "+55 11@wa:1";
    await client.sendMessage(contact, "hi");
    await client.transcript(contact, { session: "all", limit: 20, before: "c2" });
    await client.memory(contact);
    await client.context(contact);
    await client.commitRound(contact, "h", [], { input_tokens: 1, output_tokens: 1 });
    await client.searchSessions(contact, { q: "corte com o Bruno", limit: 3 });
    await client.erase(contact);
    await client.openapi();
    const path = "/v1/contacts/%2B55%2011%40wa%3A1";
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.url.pathname}${s.url.search}`),
      [
        `POST ${path}/messages`,
        `GET ${path}/messages?session=all&limit=20&before=c2`,
        `GET ${path}/memory`,
        `GET ${path}/context`,
        `POST ${path}/rounds`,
        `GET ${path}/sessions?q=corte%20com%20o%20Bruno&limit=3`,
        `DELETE ${path}`,
        "GET /v1/openapi.json",
      ],
    );
    assert.deepEqual(JSON.parse(seen[0]!.body), { text: "hi" });
    assert.equal(seen[0]!.headers.get("content-type"), "application/json");
    assert.equal(seen[2]!.headers.get("idempotency-key"), null, "no key on a GET");
  });

  it("searches earlier sessions and returns their records", async () => {
    const records = {
      sessions: [{ session: 2, excerpt: "customer: corte", ids: ["BK-9F3A21C7"], messages: 6, ended_at: 1773360000, score: 2.7 }],
    };
    const { client, seen } = fakeClient([{ status: 200, body: records }]);
    const found = await client.searchSessions("ana", { q: "BK-9F3A21C7" });
    assert.deepEqual(found, records);
    assert.equal(seen[0]!.url.search, "?q=BK-9F3A21C7");
  });

  it("sends a session number as is", async () => {
    const { client, seen } = fakeClient([{ status: 200, body: { messages: [], next_before: null } }]);
    await client.transcript("ana", { session: 3 });
    assert.equal(seen[0]!.url.search, "?session=3");
  });

  it("reads every page of the transcript and gives the messages oldest first", async () => {
    const message = (seq: number) => ({ session: 1, seq, role: "user", content: [], created_at: 1767225600 });
    const { client, seen } = fakeClient([
      { status: 200, body: { messages: [message(5), message(6)], next_before: "c5" } },
      { status: 200, body: { messages: [message(3), message(4)], next_before: "c3" } },
      { status: 200, body: { messages: [message(1), message(2)], next_before: null } },
    ]);
    const messages = await client.transcriptMessages("ana", { session: "current" });
    assert.deepEqual(
      messages.map((m) => m.seq),
      [1, 2, 3, 4, 5, 6],
    );
    assert.deepEqual(
      seen.map((s) => s.url.search),
      ["?session=current", "?session=current&before=c5", "?session=current&before=c3"],
    );
  });
});

/** A response of the Messages API as the official SDK types it. */
const SDK_MESSAGE: Anthropic.Message = {
  id: "msg_1",
  type: "message",
  role: "assistant",
  model: "claude-sonnet-4-5",
  container: null,
  stop_reason: "end_turn",
  stop_sequence: null,
  stop_details: null,
  diagnostics: null,
  content: [
    { type: "thinking", thinking: "They greet me.", signature: "sig" },
    { type: "text", text: "Hello!", citations: null },
  ],
  usage: {
    input_tokens: 120,
    output_tokens: 12,
    cache_read_input_tokens: null,
    cache_creation_input_tokens: 40,
    cache_creation: { ephemeral_5m_input_tokens: 30, ephemeral_1h_input_tokens: 10 },
    server_tool_use: null,
    service_tier: "standard",
    inference_geo: null,
    output_tokens_details: null,
    speed: null,
  },
};

describe("commitRound", () => {
  it("sends the usage and the blocks as given: the API's full usage, a text block's citations", async () => {
    const { client, seen } = fakeClient([{ status: 200, body: {} }]);
    const messages: degrau.MessageInput[] = [
      { role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral", ttl: "1h" } }] },
      { role: "assistant", content: [{ type: "text", text: "Hello!", citations: null }] },
    ];
    await client.commitRound(
      "ana",
      "h1",
      messages,
      // The Messages API's usage as it comes, written inline (an object literal).
      {
        input_tokens: 10,
        output_tokens: 5,
        cache_creation_input_tokens: 3,
        cache_read_input_tokens: 100,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 3 },
        server_tool_use: null,
        service_tier: "standard",
      },
      { idempotencyKey: "k1" },
    );
    assert.equal(seen[0]!.method, "POST");
    assert.equal(seen[0]!.url.pathname, "/v1/contacts/ana/rounds");
    assert.equal(seen[0]!.headers.get("idempotency-key"), "k1");
    assert.deepEqual(JSON.parse(seen[0]!.body), {
      head: "h1",
      messages: [
        { role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral", ttl: "1h" } }] },
        { role: "assistant", content: [{ type: "text", text: "Hello!", citations: null }] },
      ],
      usage: {
        input_tokens: 10,
        output_tokens: 5,
        cache_creation_input_tokens: 3,
        cache_read_input_tokens: 100,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 3 },
        server_tool_use: null,
        service_tier: "standard",
      },
    });
  });

  it("takes the SDK's message.content and message.usage without a cast and sends them untouched", async () => {
    const { client, seen } = fakeClient([{ status: 200, body: {} }]);
    await client.commitRound(
      "ana",
      "h1",
      [
        { role: "user", content: "hi" },
        { role: "assistant", content: SDK_MESSAGE.content },
      ],
      SDK_MESSAGE.usage,
    );
    const body = JSON.parse(seen[0]!.body);
    assert.deepEqual(body.messages[1].content, JSON.parse(JSON.stringify(SDK_MESSAGE.content)));
    assert.deepEqual(body.usage, JSON.parse(JSON.stringify(SDK_MESSAGE.usage)));
  });

  it("sends tool calls and results, a string content and a block degrau does not store as they are", async () => {
    const { client, seen } = fakeClient([{ status: 200, body: {} }]);
    const messages: degrau.MessageInput[] = [
      { role: "user", content: "any slot?" },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "toolu_1", name: "list_free_slots", input: { day: "2026-12-04" }, caller: { type: "direct" } }],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "[]" }], is_error: null },
          // The server names it in its 400; the client does not judge blocks.
          { type: "image", source: { type: "url", url: "https://example.com/a.png" } },
        ],
      },
      { role: "assistant", content: "None." },
    ];
    await client.commitRound("ana", "h1", messages, { input_tokens: 1, output_tokens: 1 });
    assert.deepEqual(JSON.parse(seen[0]!.body).messages, JSON.parse(JSON.stringify(messages)));
  });
});
