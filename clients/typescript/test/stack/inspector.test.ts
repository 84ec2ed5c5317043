/**
 * The memory inspector (`GET /v1/inspector`) in headless Chromium against the local
 * stack: an operator enters the dev credentials, picks a seeded contact, sees its
 * facts and what the model gets, corrects a fact (the next model request carries
 * the correction), and erases the contact after confirming. A screenshot of the
 * page with the corrected fact is kept at `.local/artifacts/inspector.png`.
 * Skipped, saying why, when no stack is configured.
 */

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { it } from "node:test";

import { NotFound } from "../../src/index.js";
import { Browser } from "./cdp.js";
import { API, PACKAGE, STACK_MISSING, client, freshTenant, operator, requireStack, standinRequests } from "./stack.js";

const ARTIFACTS = resolve(PACKAGE, "../../.local/artifacts");
const SCREENSHOT = join(ARTIFACTS, "inspector.png");
const OPERATOR = "ops-inspector";

it("the inspector lists a contact, shows its facts and summary, corrects a fact the model then gets, and erases it", { skip: STACK_MISSING, timeout: 240_000 }, async (t) => {
  await requireStack();
  const page = await fetch(`${API}/v1/inspector`);
  assert.equal(page.status, 200, `GET /v1/inspector answered ${page.status}`);
  assert.match(page.headers.get("content-type") ?? "", /^text\/html/);

  const tenant = freshTenant();
  const contact = `insp-${crypto.randomUUID().slice(0, 8)}`;
  const chat = client(tenant);
  const ops = operator(tenant);
  await chat.sendMessage(contact, "Hi, I am Ana. I usually book with Rira.");
  await ops.putFact(contact, "name", "Ana");
  await ops.putFact(contact, "preferred_professional", "Rira");

  const browser = await Browser.launch();
  try {
    const tab = await browser.newPage();
    await tab.goto(`${API}/v1/inspector`);
    await tab.waitFor(`document.getElementById("credentials")`, "the inspector's credentials form (GET /v1/inspector serving functions/ask/inspector/index.html)", 5_000);
    await tab.choose("#auth-mode", "dev");
    await tab.fill("#tenant", tenant);
    await tab.fill("#scopes", "memory:read memory:write");
    await tab.fill("#operator", OPERATOR);
    await tab.click("#connect");

    const row = `#facts tr[data-key="preferred_professional"]`;
    await tab.click(`#contacts button[data-contact="${contact}"]`);
    await tab.waitFor(`document.querySelector('${row} .fact-value')?.textContent === "Rira"`, "the seeded fact");
    const summary = await tab.waitFor<string>(`document.getElementById("summary")?.textContent`, "what the model gets");
    assert.match(summary, /<contact_context>/);
    assert.match(summary, /Rira/);
    assert.equal(await tab.evaluate(`document.querySelector('#facts tr[data-key="name"] .fact-value').textContent`), "Ana");

    // Correct the fact through the page.
    await tab.click(`${row} .edit-fact`);
    await tab.fill("#edit-preferred_professional", "Rita");
    await tab.click(`${row} .save-fact`);
    await tab.waitFor(`document.querySelector('${row} .fact-value')?.textContent === "Rita"`, "the corrected fact");
    await tab.waitFor(`/Rita/.test(document.getElementById("summary")?.textContent ?? "")`, "the corrected fact in what the model gets");
    assert.match(await tab.evaluate<string>(`document.querySelector('${row}').textContent`), /operator.*ops-inspector/s);
    assert.equal(await tab.evaluate(`document.querySelector('${row} details summary').textContent`), "1 earlier");
    assert.ok(await tab.evaluate(`document.querySelectorAll("#chart rect").length >= 2`), "the chart has the round's bars");

    const [fact] = (await ops.listFacts(contact)).filter((f) => f.key === "preferred_professional");
    assert.equal(fact?.value, "Rita");
    assert.deepEqual([fact?.set_by.kind, fact?.set_by.kind === "operator" ? fact.set_by.by : undefined], ["operator", OPERATOR]);
    assert.deepEqual(fact?.history.map((h) => h.value), ["Rira"]);

    // The next model request carries the correction.
    const token = crypto.randomUUID();
    await chat.sendMessage(contact, `Is my usual professional free tomorrow? (${token})`);
    const calls = (await standinRequests()).filter((c) => JSON.stringify(c.body.messages ?? []).includes(token));
    assert.ok(calls.length > 0, "the stand-in received the message");
    const system = JSON.stringify(calls[0]!.body.system);
    assert.ok(system.includes("Rita") && !system.includes("Rira"), `the model request's system: ${system}`);

    // The page read again: the second round in the transcript and the chart.
    await tab.click("#refresh-contact");
    await tab.waitFor(`document.getElementById("transcript")?.textContent.includes(${JSON.stringify(token)})`, "the second round");
    // A model call per assistant message (the stand-in may answer with a tool round).
    const answers = await tab.evaluate<number>(`document.querySelectorAll("#transcript .message.assistant").length`);
    assert.ok(answers >= 2, `${answers} assistant messages`);
    assert.equal(await tab.evaluate(`document.querySelectorAll("#chart circle").length`), answers, "a point per model call in the chart");
    mkdirSync(ARTIFACTS, { recursive: true });
    await tab.screenshot(SCREENSHOT);
    t.diagnostic(`screenshot: ${SCREENSHOT}`);

    // Erase, confirming in the dialog.
    await tab.click("#erase");
    await tab.waitFor(`document.getElementById("confirm").open`, "the confirmation dialog");
    await tab.click("#confirm-ok");
    await tab.waitFor(`/was erased/.test(document.getElementById("erased")?.textContent ?? "")`, "the erase's answer");
    assert.deepEqual(tab.errors, [], "no error in the page");
  } finally {
    await browser.close();
  }
  await assert.rejects(chat.memory(contact), (e: unknown) => e instanceof NotFound);
  const left = [];
  for await (const c of ops.iterContacts()) left.push(c.contact);
  assert.ok(!left.includes(contact), `still listed: ${left.join(", ")}`);
});
