/**
 * The streaming chat page (`examples/web-chat/index.html`) in headless Chromium,
 * loaded from its file as a user would open it (origin `null`: the local stack's
 * `cargo lambda watch` answers CORS for any origin). Against the local stack it shows
 * a tool round's answer growing before the round ends, each model call's text as
 * stored, the tool's status line, the stored seqs, and a 400 before the stream with
 * its type and message; a screenshot is kept at `.local/artifacts/web-chat.png`.
 * Against a scripted stream served by this test it clears what it showed on
 * `restart`, shows an `error` event and a stream that broke off, and sends the
 * request the route expects (Bearer token, a fresh `Idempotency-Key`). Its SSE reader
 * reads a stream cut anywhere as the whole. The stack tests are skipped, saying why,
 * when no stack is configured.
 */

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { it } from "node:test";

import { NotFound } from "../../src/index.js";
import { Browser, type Page } from "./cdp.js";
import { API, PACKAGE, STACK_MISSING, STANDIN, client, freshTenant, requireStack } from "./stack.js";

const PAGE_URL = pathToFileURL(join(PACKAGE, "examples/web-chat/index.html")).href;
const ARTIFACTS = resolve(PACKAGE, "../../.local/artifacts");
const SCREENSHOT = join(ARTIFACTS, "web-chat.png");
const LAST_ANSWER = `document.querySelector("#conversation > li:last-child .answer")`;

/** What the page shows of its last answer. */
interface Shown {
  state: string;
  calls: string[];
  tools: { id: string; state: string; text: string }[];
  errors: string[];
  status: string;
  session?: string;
  firstSeq?: string;
  lastSeq?: string;
}

const SHOWN = `(() => {
  const answer = ${LAST_ANSWER};
  if (!answer) return null;
  const texts = (selector) => Array.from(answer.querySelectorAll(selector), (p) => p.textContent);
  return {
    state: answer.dataset.state,
    calls: texts("p.call"),
    tools: Array.from(answer.querySelectorAll("p.tool"), (p) => ({ id: p.dataset.toolId, state: p.dataset.state, text: p.textContent })),
    errors: texts("p.error"),
    status: answer.nextElementSibling.textContent,
    session: answer.dataset.session, firstSeq: answer.dataset.firstSeq, lastSeq: answer.dataset.lastSeq,
  };
})()`;

/** Opens the page and fills the connection fields as a user would. */
async function openChat(browser: Browser, connection: { base: string; contact: string } & ({ tenant: string } | { token: string })): Promise<Page> {
  const tab = await browser.newPage();
  await tab.goto(PAGE_URL);
  await tab.fill("#base", connection.base);
  if ("tenant" in connection) {
    await tab.choose("#auth-mode", "dev");
    await tab.fill("#tenant", connection.tenant);
  } else {
    await tab.choose("#auth-mode", "jwt");
    await tab.fill("#token", connection.token);
  }
  await tab.fill("#contact", connection.contact);
  return tab;
}

/**
 * Polls the last answer until it is done or failed, keeping each distinct text its
 * model-call paragraphs showed before that (the answer as the page showed it growing).
 */
async function watchAnswer(tab: Page, timeoutMs = 60_000): Promise<{ seen: string[]; last: Shown }> {
  const seen: string[] = [];
  const until = Date.now() + timeoutMs;
  for (;;) {
    const shown = await tab.evaluate<Shown | null>(SHOWN);
    if (shown && (shown.state === "done" || shown.state === "error")) return { seen, last: shown };
    const text = shown?.calls.join("\n") ?? "";
    if (text !== "" && text !== seen.at(-1)) seen.push(text);
    if (Date.now() > until) throw new Error(`no done or error within ${timeoutMs / 1000} s; the page shows ${JSON.stringify(shown)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function setPace(deltaMs: number): Promise<void> {
  const answer = await fetch(`${STANDIN}/stand-in/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ delta_ms: deltaMs }),
  });
  assert.equal(answer.status, 200, `POST /stand-in/stream answered ${answer.status}`);
}

it("the page shows a tool round's answer as it is written, as stored, with the tool's status line", { skip: STACK_MISSING, timeout: 180_000 }, async (t) => {
  await requireStack();
  const tenant = freshTenant();
  const contact = `web-${crypto.randomUUID().slice(0, 8)}`;
  const browser = await Browser.launch();
  // The stand-in writes an event every 40 ms, as a model does, so the answer has a
  // while to grow. It is the whole stand-in's pace: other tests just run slower.
  await setPace(40);
  let watched: { seen: string[]; last: Shown };
  try {
    const tab = await openChat(browser, { base: API, tenant, contact });
    await tab.fill("#message", "Hi, any free slots on 2026-12-03?");
    await tab.click("#send");
    watched = await watchAnswer(tab);
    mkdirSync(ARTIFACTS, { recursive: true });
    await tab.screenshot(SCREENSHOT);
    t.diagnostic(`screenshot: ${SCREENSHOT}`);
    assert.deepEqual(tab.errors, [], "no error in the page");
    assert.equal(await tab.evaluate(`document.getElementById("message").value`), "", "the message box is emptied once stored");
  } finally {
    await setPace(0);
    await browser.close();
  }

  const { seen, last } = watched;
  assert.equal(last.state, "done", `the page shows ${JSON.stringify(last)}`);
  const final = last.calls.join("\n");
  t.diagnostic(`${seen.length} distinct texts shown before done`);
  // Shown as it was written: the text grew through at least two values before done.
  assert.ok(seen.length >= 2, `only ${JSON.stringify(seen)} shown before done; final ${JSON.stringify(final)}`);
  // Each value the one before it grown (the last may be the whole text: done follows
  // the model's last piece by a few events).
  for (const [index, text] of seen.entries()) {
    const next = seen[index + 1] ?? final;
    assert.ok(next.startsWith(text), `${JSON.stringify(text)} then ${JSON.stringify(next)}: not growing`);
  }

  // As stored: a paragraph per model call, each its assistant message's text.
  const stored = (await client(tenant).transcriptMessages(contact)).filter((m) => m.seq >= Number(last.firstSeq) && m.seq <= Number(last.lastSeq));
  assert.deepEqual([last.firstSeq, last.lastSeq, last.session], ["1", String(stored.at(-1)?.seq), "1"], "the stored round's seqs");
  assert.equal(stored.length, 4, "a tool round: message, tool call, tool result, answer");
  const assistantTexts = stored
    .filter((m) => m.role === "assistant")
    .map((m) => m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n"));
  assert.deepEqual(last.calls, assistantTexts);
  assert.match(last.status, /^Stored: session 1, messages 1–4\.$/);

  // The tool call as a status line that ended done.
  const toolUses = stored.flatMap((m) => m.content.flatMap((b) => (b.type === "tool_use" ? [b] : [])));
  assert.deepEqual(
    last.tools.map((line) => [line.id, line.state, line.text]),
    toolUses.map((use) => [use.id, "done", `✓ ${use.name} done`]),
  );
  assert.equal(toolUses[0]?.name, "list_free_slots");
});

it("the page shows an error answered before the stream with its status, type and message", { skip: STACK_MISSING, timeout: 120_000 }, async () => {
  await requireStack();
  const tenant = freshTenant();
  const contact = `web-${crypto.randomUUID().slice(0, 8)}`;
  // What the route answers an empty message, asked directly.
  const direct = await fetch(`${API}/v1/contacts/${contact}/messages/stream`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant-id": tenant, "idempotency-key": crypto.randomUUID() },
    body: JSON.stringify({ text: "" }),
  });
  const { error } = (await direct.json()) as { error: { type: string; message: string } };
  assert.deepEqual([direct.status, error.type], [400, "invalid_request"]);

  const browser = await Browser.launch();
  try {
    const tab = await openChat(browser, { base: API, tenant, contact });
    await tab.click("#send");
    const { last } = await watchAnswer(tab);
    assert.equal(last.state, "error");
    assert.deepEqual(last.errors, [`400 invalid_request: ${error.message}`]);
    assert.deepEqual([last.calls, last.status], [[], "Nothing was stored."]);
    assert.deepEqual(tab.errors, [], "no error in the page");
  } finally {
    await browser.close();
  }
  await assert.rejects(client(tenant).memory(contact), (e: unknown) => e instanceof NotFound);
});

/** The request the page sent to the scripted stream. */
interface Received {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: string;
}

/**
 * A stand-in for the streaming route: answers CORS as the stack's streaming API does
 * on AWS for its `AllowedOrigin` (here the page's origin, whatever it is: the
 * preflight allows only the headers the template's does), records each POST, and
 * answers it with `script(n)` (n counts the POSTs), writing what the script yields in
 * the pieces it yields them, a few milliseconds apart.
 */
function scriptedStream(script: (n: number) => AsyncIterable<string | Uint8Array>) {
  const received: Received[] = [];
  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const cors = { "access-control-allow-origin": String(request.headers.origin), vary: "origin" };
    if (request.method === "OPTIONS") {
      response.writeHead(204, { ...cors, "access-control-allow-methods": "POST,OPTIONS", "access-control-allow-headers": "authorization,content-type,idempotency-key" }).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    received.push({ method: request.method ?? "", path: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks).toString("utf8") });
    response.writeHead(200, { ...cors, "content-type": "text/event-stream", "cache-control": "no-cache" });
    for await (const piece of script(received.length)) {
      response.write(piece);
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    response.end();
  });
  return { server, received };
}

/** The bytes of `text` in pieces ending at the byte offsets `at`. */
function cut(text: string, ...at: number[]): Uint8Array[] {
  const bytes = new TextEncoder().encode(text);
  return [0, ...at, bytes.length].slice(1).map((end, index) => bytes.slice([0, ...at][index], end));
}

it("the page clears what it showed on restart, shows an error event and a stream that broke off, and sends the route's request", { timeout: 120_000 }, async () => {
  let proceed: () => void = () => {};
  const restartReached = new Promise<void>((resolve) => {
    proceed = resolve;
  });
  const { server, received } = scriptedStream(async function* (n) {
    if (n === 1) {
      // Cut between a CR and its LF (13) and inside the ✓ (92).
      yield* cut('event: delta\r\ndata: {"text":"Before the ","call":0}\r\n\r\nevent: delta\ndata: {"text":"restart ✓","call":0}\n\n', 13, 40, 92);
      yield 'event: tool_started\ndata: {"id":"toolu_1","name":"list_free_slots"}\n\n';
      await restartReached;
      yield 'event: restart\ndata: {"reason":"a commit race"}\n\n: keep-alive\n\n';
      yield 'event: some_future_event\ndata: {"x":1}\n\nevent: delta\ndata: {"text":"After","call":0}\n\n';
      yield 'event: error\ndata: {"status":503,"error":{"type":"unavailable","message":"The model is overloaded"}}\n\n';
    } else {
      // Breaks off: no done, no error.
      yield 'event: delta\ndata: {"text":"Half an","call":0}\n\n';
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const browser = await Browser.launch();
  try {
    const tab = await openChat(browser, { base, token: "a-test-token", contact: "web ana" });
    await tab.fill("#message", "Hello");
    await tab.click("#send");
    await tab.waitFor(`${LAST_ANSWER}?.querySelector("p.call")?.textContent === "Before the restart ✓" && ${LAST_ANSWER}.querySelector("p.tool")?.dataset.state === "running"`, "the text and the tool line before the restart");
    proceed();
    const { last } = await watchAnswer(tab);
    assert.equal(last.state, "error");
    assert.deepEqual(last.calls, ["After"], "only what came after the restart");
    assert.deepEqual(last.tools, [], "the tool line went with the restart");
    assert.deepEqual(last.errors, ["503 unavailable: The model is overloaded (nothing was stored)"]);
    assert.equal(await tab.evaluate(`document.getElementById("message").value`), "Hello", "the message is kept to send again");

    await tab.click("#send");
    await tab.waitFor(`document.querySelectorAll("#conversation > li").length === 2`, "a second turn");
    const broken = (await watchAnswer(tab)).last;
    assert.equal(broken.state, "error");
    assert.deepEqual(broken.calls, ["Half an"]);
    assert.deepEqual(tab.errors, [], "no error in the page");

    const [first, second] = received;
    assert.ok(first && second, `${received.length} requests`);
    for (const request of [first, second]) {
      assert.equal(request.method, "POST");
      assert.equal(request.path, "/v1/contacts/web%20ana/messages/stream");
      assert.equal(request.headers.authorization, "Bearer a-test-token");
      assert.equal(request.headers["x-tenant-id"], undefined);
      assert.equal(request.headers["content-type"], "application/json");
      assert.deepEqual(JSON.parse(request.body), { text: "Hello" });
      assert.match(String(request.headers["idempotency-key"]), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    assert.notEqual(first.headers["idempotency-key"], second.headers["idempotency-key"], "a fresh key per message");
    assert.equal(broken.errors.length, 1);
    assert.ok(broken.errors[0]!.includes(`Idempotency-Key ${String(second.headers["idempotency-key"])} replays it`), broken.errors[0]);
  } finally {
    await browser.close();
    server.close();
  }
});

it("the page's SSE reader reads a stream cut anywhere as the whole", { timeout: 60_000 }, async () => {
  const browser = await Browser.launch();
  try {
    const tab = await browser.newPage();
    await tab.goto(PAGE_URL);
    const result = await tab.evaluate<{ whole: unknown; byByte: unknown; differing: number[][] }>(`(() => {
      const bytes = new TextEncoder().encode(
        ": keep-alive\\r\\n\\r\\nevent: delta\\r\\ndata: {\\"text\\":\\"Olá 🙂\\",\\"call\\":0}\\r\\n\\r\\n" +
        "event:delta\\ndata:{\\"text\\":\\"x\\",\\"call\\":1}\\n\\nevent: future\\rdata: {}\\r\\r" +
        "data: a\\ndata: b\\n\\nevent: done\\ndata: {\\"session\\":1}\\n\\nevent: unfinished\\ndata: {}\\n");
      const read = (cuts) => {
        const reader = new SseReader();
        const events = [];
        let start = 0;
        for (const end of [...cuts, bytes.length]) { events.push(...reader.feed(bytes.slice(start, end))); start = end; }
        return events;
      };
      const whole = read([]);
      const differing = [];
      for (let i = 1; i < bytes.length; i++)
        for (let j = i; j < bytes.length; j++)
          if (JSON.stringify(read([i, j])) !== JSON.stringify(whole)) differing.push([i, j]);
      return { whole, byByte: read(Array.from(bytes.keys()).slice(1)), differing: differing.slice(0, 5) };
    })()`);
    assert.deepEqual(result.whole, [
      { event: "delta", data: '{"text":"Olá 🙂","call":0}' },
      { event: "delta", data: '{"text":"x","call":1}' },
      { event: "future", data: "{}" },
      { event: "message", data: "a\nb" },
      { event: "done", data: '{"session":1}' },
    ]);
    assert.deepEqual(result.byByte, result.whole, "fed byte by byte");
    assert.deepEqual(result.differing, [], "cut in three at these byte offsets, it reads otherwise");
  } finally {
    await browser.close();
  }
});
