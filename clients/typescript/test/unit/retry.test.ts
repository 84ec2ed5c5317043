/** Retries: which answers are retried, how long the client waits, its bounds. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { APIConnectionError, APITimeoutError, DegrauError, InternalError, InvalidRequest, RateLimited, TenantConfigInvalid, Unavailable } from "../../src/index.js";
import { envelope, fakeClient } from "./fake.js";

const CONTEXT = { session: 1, head: "h1", opens_session: true, system: [], messages: [], cache_control: { type: "ephemeral" } };
const ROUND = { session: 1, round: { first_seq: 1, last_seq: 2 }, compaction_queued: false, usage: {} };
const ASK = { session: 1, reply: { text: "Hi", content: [], stop_reason: "end_turn" }, round: { first_seq: 1, last_seq: 2 }, usage: {}, compaction_queued: false };

describe("retries", () => {
  it("waits the seconds a 503's Retry-After gives, then succeeds", async () => {
    const { client, seen, sleeps } = fakeClient([
      { status: 503, body: envelope("unavailable"), headers: { "retry-after": "2" } },
      { status: 200, body: CONTEXT },
    ]);
    assert.equal((await client.context("ana")).head, "h1");
    assert.equal(seen.length, 2);
    assert.deepEqual(sleeps, [2000]);
  });

  it("waits until the HTTP date a 429's Retry-After gives", async () => {
    const start = Date.parse("2026-03-01T12:00:00Z");
    const { client, sleeps } = fakeClient(
      [
        { status: 429, body: envelope("rate_limited"), headers: { "retry-after": new Date(start + 7000).toUTCString() } },
        { status: 200, body: CONTEXT },
      ],
      {},
      start,
    );
    await client.context("ana");
    assert.deepEqual(sleeps, [7000]);
  });

  it("backs off exponentially without Retry-After and stops after the retries", async () => {
    const { client, seen, sleeps } = fakeClient([{ status: 500, body: envelope("internal_error") }]);
    await assert.rejects(client.memory("ana"), InternalError);
    assert.equal(seen.length, 4, "the first attempt and 3 retries");
    // Jitter fixed at 0: half of 500, 1000, 2000 ms.
    assert.deepEqual(sleeps, [250, 500, 1000]);
  });

  it("does not retry a 500 tenant_config_invalid: the stored configuration will not read on its own", async () => {
    const { client, seen, sleeps } = fakeClient([{ status: 500, body: envelope("tenant_config_invalid") }]);
    await assert.rejects(client.memory("ana"), TenantConfigInvalid);
    assert.equal(seen.length, 1);
    assert.deepEqual(sleeps, []);
  });

  it("spreads the backoff with jitter, within half and all of the step", async () => {
    const { client, sleeps } = fakeClient([{ status: 504, body: envelope("model_timeout") }], {
      random: () => 0.999,
      retries: 2,
      backoffMs: 100,
    });
    await assert.rejects(client.memory("ana"));
    assert.equal(sleeps.length, 2);
    assert.ok(sleeps[0]! > 99 && sleeps[0]! < 100, `${sleeps[0]}`);
    assert.ok(sleeps[1]! > 199 && sleeps[1]! < 200, `${sleeps[1]}`);
  });

  it("caps a step at maxBackoffMs", async () => {
    const { client, sleeps } = fakeClient([{ status: 503, body: envelope("unavailable") }], {
      retries: 5,
      backoffMs: 1000,
      maxBackoffMs: 3000,
      deadlineMs: 600_000,
    });
    await assert.rejects(client.memory("ana"), Unavailable);
    assert.deepEqual(sleeps, [500, 1000, 1500, 1500, 1500]);
  });

  it("honours the attempt bound it is given, and retries: 0 disables retrying", async () => {
    const once = fakeClient([{ status: 503, body: envelope("unavailable"), headers: { "retry-after": "1" } }], { retries: 0 });
    await assert.rejects(once.client.context("ana"), Unavailable);
    assert.equal(once.seen.length, 1);
    assert.deepEqual(once.sleeps, []);
    const twice = fakeClient([{ status: 503, body: envelope("unavailable"), headers: { "retry-after": "1" } }], { retries: 1 });
    await assert.rejects(twice.client.context("ana"), Unavailable);
    assert.equal(twice.seen.length, 2);
  });

  it("stops at the deadline: no wait that would end past it", async () => {
    const { client, seen, sleeps } = fakeClient([
      { status: 503, body: envelope("unavailable"), headers: { "retry-after": "30" } },
    ]);
    const error = await client.context("ana").then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof Unavailable);
    assert.equal(error.retryAfter, 30);
    // 0 s: first attempt; 30 s: second; a third would start at 60 s, the deadline.
    assert.equal(seen.length, 2);
    assert.deepEqual(sleeps, [30_000]);
  });

  it("does not wait for a Retry-After longer than the deadline", async () => {
    const { client, seen, sleeps } = fakeClient(
      [{ status: 429, body: envelope("rate_limited"), headers: { "retry-after": "3600" } }],
      { deadlineMs: 10_000 },
    );
    await assert.rejects(client.context("ana"), RateLimited);
    assert.equal(seen.length, 1);
    assert.deepEqual(sleeps, []);
  });

  it("aborts the attempt in flight at the deadline, and does not retry it", async () => {
    const { client, seen } = fakeClient(["hang", { status: 200, body: CONTEXT }], { deadlineMs: 50 });
    const error = await client.context("ana").then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof APITimeoutError && error instanceof APIConnectionError && error instanceof DegrauError);
    assert.equal((error.cause as Error).name, "TimeoutError");
    assert.equal(error.requestId, undefined);
    assert.equal(seen.length, 1);
  });

  it("reuses the generated Idempotency-Key across the attempts of one POST, a new one per call", async () => {
    const { client, seen } = fakeClient([
      { status: 503, body: envelope("unavailable"), headers: { "retry-after": "1" } },
      { status: 200, body: ASK },
      { status: 200, body: ROUND },
    ]);
    await client.sendMessage("ana", "hello");
    await client.commitRound("ana", "h1", [], { input_tokens: 1, output_tokens: 1 });
    const keys = seen.map((s) => s.headers.get("idempotency-key"));
    assert.match(keys[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(keys[1], keys[0], "the retry carries the same key");
    assert.notEqual(keys[2], keys[0], "another call, another key");
    assert.equal(seen[1]!.body, seen[0]!.body, "the retry carries the same body");
  });

  it("sends the caller's Idempotency-Key as given", async () => {
    const { client, seen } = fakeClient([{ status: 200, body: ASK }]);
    await client.sendMessage("ana", "hello", { idempotencyKey: "ana-turn-17" });
    assert.equal(seen[0]!.headers.get("idempotency-key"), "ana-turn-17");
  });

  it("retries a connection that failed", async () => {
    const { client, seen, sleeps } = fakeClient([new TypeError("fetch failed"), { status: 200, body: CONTEXT }]);
    assert.equal((await client.context("ana")).head, "h1");
    assert.equal(seen.length, 2);
    assert.deepEqual(sleeps, [250]);
  });

  it("throws APIConnectionError, fetch's error as its cause, when every attempt failed", async () => {
    const { client, seen } = fakeClient([new TypeError("fetch failed")], { retries: 2 });
    const error = await client.erase("ana").then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof APIConnectionError && !(error instanceof APITimeoutError));
    assert.ok(error.cause instanceof TypeError);
    assert.equal(seen.length, 3);
  });

  for (const [status, type] of [
    [400, "invalid_request"],
    [401, "unauthenticated"],
    [404, "not_found"],
    [409, "conflict"],
    [413, "too_large"],
    [422, "idempotency_mismatch"],
    [502, "model_error"],
  ] as const) {
    it(`does not retry ${status} ${type}`, async () => {
      const { client, seen, sleeps } = fakeClient([
        { status, body: envelope(type), headers: { "retry-after": "1" } },
        { status: 200, body: ROUND },
      ]);
      await assert.rejects(client.commitRound("ana", "h1", [], { input_tokens: 1, output_tokens: 1 }), DegrauError);
      assert.equal(seen.length, 1);
      assert.deepEqual(sleeps, []);
    });
  }

  it("retries a 429 on a POST (it carries its key)", async () => {
    const { client, seen } = fakeClient([
      { status: 429, body: envelope("rate_limited"), headers: { "retry-after": "1" } },
      { status: 200, body: ROUND },
    ]);
    await client.commitRound("ana", "h1", [], { input_tokens: 1, output_tokens: 1 });
    assert.equal(seen.length, 2);
  });

  it("retries GET and DELETE alike", async () => {
    const { client, seen } = fakeClient([
      { status: 503, body: envelope("unavailable") },
      { status: 200, body: { erased: true, items: 3 } },
    ]);
    assert.deepEqual(await client.erase("ana"), { erased: true, items: 3 });
    assert.deepEqual(
      seen.map((s) => s.method),
      ["DELETE", "DELETE"],
    );
  });

  it("the last answer's error is thrown once the retries are spent", async () => {
    const { client } = fakeClient([
      { status: 503, body: envelope("unavailable") },
      { status: 400, body: envelope("invalid_request", "bad head") },
    ]);
    await assert.rejects(client.context("ana"), (e: unknown) => e instanceof InvalidRequest && e.message === "bad head");
  });
});
