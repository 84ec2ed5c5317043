/** What makes the client behave like the SDKs beside it: the request id on every error, a token provider, verifySignature against degrau's own signatures. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";

import { Conflict, SignatureError, verifySignature } from "../../src/index.js";
import { envelope, fakeClient } from "./fake.js";

const CONTEXT = { session: 1, head: "h1", opens_session: true, system: [], messages: [], cache_control: { type: "ephemeral" } };

describe("request ids", () => {
  for (const [headers, want] of [
    [{ "request-id": "c0ffee-1" }, "c0ffee-1"],
    [{ "apigw-requestid": "gw-2" }, "gw-2"],
    [{ "x-amzn-RequestId": "rest-3" }, "rest-3"],
    [{}, undefined],
  ] as const) {
    it(`reads ${JSON.stringify(headers)}`, async () => {
      const { client } = fakeClient([{ status: 409, body: envelope("conflict"), headers }], { retries: 0 });
      const error = await client.context("ana").then(
        () => assert.fail("resolved"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof Conflict);
      assert.equal(error.requestId, want);
    });
  }
});

describe("token providers", () => {
  it("asks a provider for the current token on every attempt, async or not", async () => {
    let n = 0;
    for (const token of [() => `t-${++n}`, async () => `t-${++n}`]) {
      const { client, seen } = fakeClient([
        { status: 503, body: envelope("unavailable"), headers: { "retry-after": "1" } },
        { status: 200, body: CONTEXT },
      ], { token });
      await client.context("ana");
      assert.deepEqual(
        seen.map((s) => s.headers.get("authorization")),
        [`Bearer t-${n - 1}`, `Bearer t-${n}`],
      );
    }
    const { client, seen } = fakeClient([{ status: 200, body: CONTEXT }], { token: "fixed" });
    await client.context("ana");
    assert.equal(seen[0]!.headers.get("authorization"), "Bearer fixed");
  });
});

const FIXTURES = JSON.parse(
  readFileSync(fileURLToPath(new URL("../../../../fixtures/webhook-signatures.json", import.meta.url)), "utf8"),
).cases as { name: string; secret: string; timestamp: number; body: string; header: string }[];

describe("verifySignature against degrau's own signatures", () => {
  for (const c of FIXTURES) {
    it(`verifies ${c.name}, and refuses it tampered, under another secret, or stale`, async () => {
      assert.equal(await verifySignature(c.secret, c.header, c.body, { now: c.timestamp + 10 }), c.timestamp);
      assert.equal(await verifySignature(["whsec_new", new TextEncoder().encode(c.secret)], c.header, new TextEncoder().encode(c.body), { now: c.timestamp }), c.timestamp);
      await assert.rejects(verifySignature(c.secret, c.header, `${c.body} `, { now: c.timestamp }), SignatureError);
      await assert.rejects(verifySignature(`${c.secret}x`, c.header, c.body, { now: c.timestamp }), /no signature matches/);
      await assert.rejects(verifySignature(c.secret, c.header, c.body, { now: c.timestamp + 301 }), /from now/);
    });
  }
  it("refuses a missing or malformed header", async () => {
    for (const header of [null, "", "v1=abc", "t=1700000000", "t=soon,v1=abc"]) {
      await assert.rejects(verifySignature("s", header, "", { now: 1_700_000_000 }), SignatureError);
    }
  });
});
