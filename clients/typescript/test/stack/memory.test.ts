/**
 * On the local stack: a round committed without usage gets its context estimated
 * (`usage_estimated`), and closeSession starts a new conversation keeping the
 * facts (session 2), where erase forgets.
 */

import assert from "node:assert/strict";
import { before, it } from "node:test";

import { NotFound } from "../../src/index.js";
import { freshTenant, operator, requireStack } from "./stack.js";

before(requireStack);

const round = (text: string) => [
  { role: "user" as const, content: text },
  { role: "assistant" as const, content: [{ type: "text", text: `Noted: ${text}` }] },
];

it("a round without usage is estimated, and closeSession keeps the facts and opens session 2", async () => {
  const tenant = freshTenant();
  const degrau = operator(tenant);
  await degrau.putTenantConfig({ allowed_fact_keys: ["name"] }, (await degrau.getTenantConfig()).etag);
  const first = await degrau.commitRound("lia", (await degrau.context("lia")).head, round("I am Lia"), null);
  assert.equal(first.usage_estimated, true);
  assert.ok(first.usage.context_tokens > 0, "an estimate, not zero");
  const measured = await degrau.commitRound("lia", (await degrau.context("lia")).head, round("hello"), {
    input_tokens: 300,
    output_tokens: 5,
  });
  assert.equal(measured.usage_estimated, false);
  await degrau.putFact("lia", "name", "Lia");

  assert.deepEqual(await degrau.closeSession("lia"), { session: 2, closed_session: 1 });
  assert.deepEqual(await degrau.closeSession("lia"), { session: 2, closed_session: null });
  const context = await degrau.context("lia");
  assert.equal(context.session, 2);
  assert.deepEqual(context.messages, []);
  assert.ok(context.system.some((b) => b.text.includes("Lia")), "the facts stay");
  const next = await degrau.commitRound("lia", context.head, round("a new chat"), null);
  assert.deepEqual([next.session, next.round.first_seq], [2, 1]);

  await degrau.erase("lia");
  await assert.rejects(degrau.memory("lia"), NotFound);
});
