/** A conversation through degrau's own loop (`sendMessage`), and the read routes. */

import assert from "node:assert/strict";
import { before, it } from "node:test";

import { Unauthenticated } from "../../src/index.js";
import { anonymous, client, requireStack } from "./stack.js";

before(requireStack);

it("sendMessage answers and the transcript grows with each round", async () => {
  const degrau = client();
  const first = await degrau.sendMessage("ana", "Hi, I am Ana");
  assert.ok(first.reply.text.length > 0, "a reply text");
  assert.deepEqual(first.round, { first_seq: 1, last_seq: 2 });
  assert.equal((await degrau.transcriptMessages("ana")).length, 2);
  const second = await degrau.sendMessage("ana", "How are you?");
  assert.ok(second.reply.text.length > 0);
  assert.equal(second.session, first.session);
  const messages = await degrau.transcriptMessages("ana", { session: "all" });
  assert.deepEqual(
    messages.map((m) => [m.seq, m.role]),
    [
      [1, "user"],
      [2, "assistant"],
      [3, "user"],
      [4, "assistant"],
    ],
  );
  // Pages of one message, read back to front, give the same transcript.
  const page = await degrau.transcript("ana", { limit: 1 });
  assert.equal(page.messages[0]!.seq, 4);
  assert.ok(page.next_before);
  const memory = await degrau.memory("ana");
  assert.equal(memory.session.last_seq, 4);
});

it("erase removes the contact: its next context opens a new session", async () => {
  const degrau = client();
  await degrau.sendMessage("bea", "Hello");
  const erased = await degrau.erase("bea");
  assert.equal(erased.erased, true);
  assert.ok(erased.items > 0);
  const context = await degrau.context("bea");
  assert.equal(context.opens_session, true);
  assert.deepEqual(context.messages, []);
});

it("no tenant is Unauthenticated, and the description is public", async () => {
  const nobody = anonymous();
  await assert.rejects(nobody.context("ana"), (e: unknown) => e instanceof Unauthenticated && e.status === 401);
  const document = await nobody.openapi();
  assert.equal(document.openapi, "3.1.0");
  assert.ok(Object.hasOwn(document.paths as object, "/v1/contacts/{contact}/rounds"));
});
