/**
 * `streamMessage` on the local stack: a round's deltas joined are its reply's text;
 * a replay with the same `Idempotency-Key` is `done` alone with the same body; `done`
 * is what the JSON route answers. The streaming client is a plain one: its body is
 * Server-Sent Events, not the JSON `checkedFetch` validates; `done`'s body is held
 * to the JSON route's schema instead.
 */

import assert from "node:assert/strict";
import { before, it } from "node:test";

import { DegrauClient, IdempotencyMismatch, type Done, type StreamEvent } from "../../src/index.js";
import { check } from "./openapi.js";
import { API, client, freshTenant, requireStack } from "./stack.js";

before(requireStack);

function streaming(tenant: string): DegrauClient {
  return new DegrauClient({ baseUrl: API, tenant, deadlineMs: 120_000 });
}

async function all(stream: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const events: StreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

function done(events: StreamEvent[]): Done {
  const last = events.at(-1);
  assert.ok(last?.type === "done", `the stream ends with done: ${JSON.stringify(events)}`);
  assert.equal(events.filter((e) => e.type === "done").length, 1);
  return last;
}

/**
 * The reply's text as a chat shows it: the last model call's deltas since the last
 * restart (a tool round's earlier call is its preamble).
 */
function streamedReply(events: StreamEvent[]): string {
  let shown: { text: string; call: number }[] = [];
  for (const event of events) {
    if (event.type === "restart") shown = [];
    else if (event.type === "delta") shown.push(event);
  }
  const last = Math.max(0, ...shown.map((d) => d.call));
  return shown
    .filter((d) => d.call === last)
    .map((d) => d.text)
    .join("");
}

it("a streamed round's deltas are its reply", async () => {
  const events = await all(streaming(freshTenant()).streamMessage("ana", "Hi, I am Ana. Any free slots on 2026-12-04?"));
  const answer = done(events).response;
  assert.ok(events.some((e) => e.type === "delta"), "the reply came in deltas");
  assert.equal(streamedReply(events), answer.reply.text);
  const started = events.flatMap((e) => (e.type === "tool_started" ? [[e.id, e.name]] : []));
  const finished = events.flatMap((e) => (e.type === "tool_finished" ? [[e.id, e.name]] : []));
  assert.deepEqual(started, finished);
  // Without "stream_tool_input" in the tenant's configuration, no tool input.
  assert.ok(events.every((e) => e.type !== "tool_started" || e.input === undefined));
});

it("a replay with the same key is done alone, with the same body", async () => {
  const tenant = freshTenant();
  const degrau = streaming(tenant);
  const first = await all(degrau.streamMessage("bea", "Hello there", { idempotencyKey: "bea-turn-1" }));
  const again = await all(degrau.streamMessage("bea", "Hello there", { idempotencyKey: "bea-turn-1" }));
  assert.deepEqual(again, [done(first)]);
  assert.equal((await client(tenant).memory("bea")).session.last_seq, 2, "stored once");
  // The same key with another text is refused before the stream, as on the JSON route.
  await assert.rejects(all(degrau.streamMessage("bea", "Another text", { idempotencyKey: "bea-turn-1" })), IdempotencyMismatch);
});

it("done is what the JSON route answers", async () => {
  const tenant = freshTenant();
  const text = "Hi, I am Cai. Any free slots on 2026-12-04?";
  const answered = await client(tenant).sendMessage("cai", text);
  const streamed = done(await all(streaming(tenant).streamMessage("dan", text))).response;
  // Fits the JSON route's 200 schema (throws if not)...
  check("POST", "/v1/contacts/dan/messages", 200, JSON.stringify(streamed));
  // ...and holds what the JSON route answered for the same first round of another contact.
  assert.deepEqual(Object.keys(streamed).sort(), Object.keys(answered).sort());
  assert.deepEqual(
    [streamed.session, streamed.reply, streamed.round, streamed.compaction_queued],
    [answered.session, answered.reply, answered.round, answered.compaction_queued],
  );
  assert.deepEqual(Object.keys(streamed.usage).sort(), Object.keys(answered.usage).sort());
  assert.equal(streamed.usage.output_tokens, answered.usage.output_tokens);
});
