/**
 * The context/rounds loop with the stand-in through the official @anthropic-ai/sdk,
 * and the rounds the API refuses, each as its error class.
 */

import assert from "node:assert/strict";
import { before, it } from "node:test";

import Anthropic from "@anthropic-ai/sdk";

import { Conflict, IdempotencyMismatch, InvalidRequest, TooLarge, type DegrauClient, type MessageInput } from "../../src/index.js";
import { STANDIN, client, requireStack } from "./stack.js";

before(requireStack);

const model = new Anthropic({ baseURL: STANDIN, apiKey: "offline", maxRetries: 2 });
const USAGE = { input_tokens: 120, output_tokens: 12 };

function user(text: string): MessageInput {
  return { role: "user", content: [{ type: "text", text }] };
}

function assistant(text: string): MessageInput {
  return { role: "assistant", content: [{ type: "text", text }] };
}

/** One turn of a caller's own loop: context, the model through the SDK, the round committed. */
async function turn(degrau: DegrauClient, contact: string, text: string) {
  const context = await degrau.context(contact);
  const message = user(text);
  const response = await model.messages.create({
    model: "claude-sonnet-4-5",
    max_tokens: 1024,
    system: context.system,
    messages: [
      ...context.messages,
      { role: "user", content: [{ type: "text", text, cache_control: context.cache_control }] },
    ],
  });
  // The SDK's content and usage, untouched.
  const recorded = await degrau.commitRound(
    contact,
    context.head,
    [message, { role: "assistant", content: response.content }],
    response.usage,
  );
  return { context, response, recorded };
}

it("a round run on the SDK commits, and the next context carries it", async () => {
  const degrau = client();
  const token = crypto.randomUUID();
  const first = await turn(degrau, "ana", `Hi, my code word is ${token}`);
  assert.equal(first.context.opens_session, true);
  assert.deepEqual(first.recorded.round, { first_seq: 1, last_seq: 2 });
  const usage = first.response.usage;
  assert.equal(
    first.recorded.usage.context_tokens,
    usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0),
    "the usage sent is the SDK's",
  );

  const second = await turn(degrau, "ana", "What did I say?");
  assert.equal(second.context.opens_session, false);
  assert.notEqual(second.context.head, first.context.head);
  const window = second.context.messages;
  assert.deepEqual(
    window.map((m) => m.role),
    ["user", "assistant"],
  );
  assert.ok(JSON.stringify(window[0]).includes(token), "the window holds the user message");
  const reply = first.response.content.find((b) => b.type === "text");
  assert.ok(reply?.type === "text");
  assert.ok(JSON.stringify(window[1]).includes(reply.text.slice(0, 40)), "and the model's answer");
  // The second round follows the first in the same session.
  assert.deepEqual(second.recorded.round, { first_seq: 3, last_seq: 4 });
  assert.equal((await degrau.transcriptMessages("ana")).length, 4);
});

it("the SDK's raw message.usage (with its cache_creation split) and message.content commit untouched", async () => {
  const degrau = client();
  const context = await degrau.context("bea");
  // Long enough to pass the minimum cacheable prefix, so that the context's breakpoint
  // on it writes the cache: a split of non-zero writes that the server checks.
  const text = `Keep this for later, ${crypto.randomUUID()}: ${"the slots of the week are Monday to Friday. ".repeat(120)}`;
  const response = await model.messages.create({
    model: "claude-sonnet-4-5",
    max_tokens: 1024,
    system: context.system,
    messages: [...context.messages, { role: "user", content: [{ type: "text", text, cache_control: context.cache_control }] }],
  });
  const usage = response.usage;
  assert.ok(usage.cache_creation !== null, "the stand-in returns cache_creation");
  assert.ok((usage.cache_creation_input_tokens ?? 0) > 0, JSON.stringify(usage));
  assert.equal(
    usage.cache_creation.ephemeral_5m_input_tokens + usage.cache_creation.ephemeral_1h_input_tokens,
    usage.cache_creation_input_tokens,
  );

  const recorded = await degrau.commitRound(
    "bea",
    context.head,
    [{ role: "user", content: text }, { role: "assistant", content: response.content }],
    usage,
  );
  assert.deepEqual(recorded.round, { first_seq: 1, last_seq: 2 });
  assert.equal(recorded.usage.cache_creation_input_tokens, usage.cache_creation_input_tokens);
  assert.equal(
    recorded.usage.context_tokens,
    usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0),
  );
});

it("a usage whose cache_creation split does not add up is InvalidRequest (400) and changes nothing", async () => {
  const degrau = client();
  const { head } = await degrau.context("flo");
  const usage = {
    input_tokens: 20,
    output_tokens: 5,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 3,
    cache_creation: { ephemeral_5m_input_tokens: 1, ephemeral_1h_input_tokens: 1 },
    service_tier: "standard",
  };
  await assert.rejects(
    degrau.commitRound("flo", head, [user("hi"), assistant("Hello.")], usage),
    (e: unknown) => e instanceof InvalidRequest && e.status === 400 && /cache_creation/.test(e.message),
  );
  assert.equal((await degrau.context("flo")).head, head, "nothing was written");
  // The same round with a split that adds up lands.
  const fixed = { ...usage, cache_creation: { ephemeral_5m_input_tokens: 1, ephemeral_1h_input_tokens: 2 } };
  assert.equal((await degrau.commitRound("flo", head, [user("hi"), assistant("Hello.")], fixed)).usage.context_tokens, 23);
});

it("a stale head is Conflict (409) and changes nothing", async () => {
  const degrau = client();
  const stale = (await degrau.context("cai")).head;
  await degrau.commitRound("cai", stale, [user("one"), assistant("Sure.")], USAGE);
  await assert.rejects(
    degrau.commitRound("cai", stale, [user("late"), assistant("Sure.")], USAGE),
    (e: unknown) => e instanceof Conflict && e.status === 409 && e.type === "conflict",
  );
  assert.equal((await degrau.memory("cai")).session.last_seq, 2);
});

it("bad rounds are refused with their error class and change nothing", async () => {
  const degrau = client();
  const { head } = await degrau.context("dan");
  const unanswered: MessageInput[] = [
    user("any free slot?"),
    {
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_ts_1", name: "list_free_slots", input: { day: "2026-12-04" } }],
    },
  ];
  const cases: [string, string, MessageInput[], new (...args: never[]) => Error, number][] = [
    ["a tool_use never answered", head, unanswered, InvalidRequest, 400],
    ["a missing head", "", [user("hi"), assistant("Hello.")], InvalidRequest, 400],
    ["a head that is no token", "not-a-head", [user("hi"), assistant("Hello.")], InvalidRequest, 400],
    ["no answer", head, [user("alone")], InvalidRequest, 400],
    [
      "a tool result over its limit",
      head,
      [
        user("any free slot?"),
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_ts_2", name: "list_free_slots", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_ts_2", content: "x".repeat(16_001) }] },
        assistant("Sure."),
      ],
      TooLarge,
      413,
    ],
  ];
  for (const [name, on, messages, ErrorClass, status] of cases) {
    await assert.rejects(
      degrau.commitRound("dan", on, messages, USAGE),
      (e: unknown) => e instanceof ErrorClass && (e as { status?: number }).status === status,
      name,
    );
  }
  assert.deepEqual(await degrau.transcriptMessages("dan", { session: "all" }), []);
  assert.equal((await degrau.context("dan")).head, head, "nothing was written");
});

it("a key replays its round, and the same key with another body is IdempotencyMismatch (422)", async () => {
  const degrau = client();
  const { head } = await degrau.context("eva");
  const round = [user("hi"), assistant("Hello.")];
  const first = await degrau.commitRound("eva", head, round, USAGE, { idempotencyKey: "eva-1" });
  assert.deepEqual(await degrau.commitRound("eva", head, round, USAGE, { idempotencyKey: "eva-1" }), first);
  await assert.rejects(
    degrau.commitRound("eva", head, [user("other"), assistant("Hello.")], USAGE, { idempotencyKey: "eva-1" }),
    (e: unknown) => e instanceof IdempotencyMismatch && e.status === 422,
  );
  assert.equal((await degrau.memory("eva")).session.last_seq, 2);
});
