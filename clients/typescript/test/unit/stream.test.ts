/**
 * `streamMessage` offline: a mock API that answers the streaming route as the
 * contract says (each event `event:` + one `data:` line + a blank line), cut at
 * awkward places (a `data:` line split between reads, a `\r\n` split in half, a
 * UTF-8 character split in half), with comments and unknown events; a JSON error
 * before the stream (thrown as today, retried as `sendMessage` is); an `error` event
 * mid-stream (thrown as its class, never retried); a stream cut before `done`; a
 * replay holding only `done`. A real HTTP server shows the events reach the caller
 * as they are sent, and that the deadline does not cut a long round.
 */

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";

import {
  DegrauClient,
  APIStatusError,
  DegrauError,
  ERROR_CLASSES,
  SseDecoder,
  StreamInterrupted,
  Unavailable,
  type AskResponse,
  type DegrauClientOptions,
  type ErrorType,
  type StreamEvent,
} from "../../src/index.js";
import { envelope } from "./fake.js";

/** What the JSON route answers for a round. */
const ANSWER: AskResponse = {
  session: 3,
  reply: { text: "Olá! Às 10h30 — serve? 👍", content: [{ type: "text", text: "Olá! Às 10h30 — serve? 👍" }], stop_reason: "end_turn" },
  round: { first_seq: 41, last_seq: 44 },
  usage: { input_tokens: 412, cache_read_input_tokens: 3270, cache_creation_input_tokens: 0, output_tokens: 38, context_tokens: 3682 },
  compaction_queued: false,
};

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

const encoder = new TextEncoder();

/** One event as the route sends it. */
function sse(event: string, data: unknown, end = "\n"): string {
  return `event: ${event}${end}data: ${JSON.stringify(data)}${end}${end}`;
}

/** A tool round: comments, an unknown event, non-ASCII text, a restart. */
function roundBody(end = "\n"): Uint8Array {
  return encoder.encode(
    [
      `: keep-alive${end}${end}`,
      sse("delta", { text: "Vou ver a agenda", call: 0 }, end),
      sse("tool_started", { id: "toolu_1", name: "list_free_slots" }, end),
      sse("thinking_summary", { text: "an event a newer server may send" }, end),
      `:${end}`,
      sse("tool_finished", { id: "toolu_1", name: "list_free_slots", is_error: false }, end),
      sse("restart", { reason: "a commit race: answered again" }, end),
      sse("delta", { text: "Olá! Às 10h30 — ", call: 1 }, end),
      sse("delta", { text: "serve? 👍", call: 1 }, end),
      sse("done", ANSWER, end),
    ].join(""),
  );
}

const ROUND_EVENTS: StreamEvent[] = [
  { type: "delta", text: "Vou ver a agenda", call: 0 },
  { type: "tool_started", id: "toolu_1", name: "list_free_slots" },
  { type: "tool_finished", id: "toolu_1", name: "list_free_slots", is_error: false },
  { type: "restart", reason: "a commit race: answered again" },
  { type: "delta", text: "Olá! Às 10h30 — ", call: 1 },
  { type: "delta", text: "serve? 👍", call: 1 },
  { type: "done", response: ANSWER },
];

/** A body read in pieces: bytes, or an error the read fails with there. */
type Chunks = (Uint8Array | string | Error)[];
/** One scripted answer: a stream, a whole JSON answer, or an error `fetch` throws. */
type Step = Chunks | { status: number; body: unknown; headers?: Record<string, string> } | Error;

/** `body` read in pieces ending at the offsets `at`. */
function cut(body: Uint8Array, ...at: number[]): Uint8Array[] {
  const edges = [0, ...at, body.length];
  return edges.slice(1).map((end, i) => body.slice(edges[i], end));
}

function streamOf(chunks: Chunks): ReadableStream<Uint8Array> {
  let next = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const piece = chunks[next++];
      if (piece === undefined) controller.close();
      else if (piece instanceof Error) controller.error(piece);
      else controller.enqueue(typeof piece === "string" ? encoder.encode(piece) : piece);
    },
  });
}

/** A client on a mock API answering `steps` in order (the last again once they run out); a fake clock and sleep. */
function mockClient(steps: Step[], options: Partial<DegrauClientOptions> = {}) {
  const requests: { url: string; headers: Headers; body: string }[] = [];
  const sleeps: number[] = [];
  let clock = 0;
  const fetch = async (request: Request): Promise<Response> => {
    requests.push({ url: request.url, headers: request.headers, body: await request.text() });
    const step = steps[Math.min(requests.length, steps.length) - 1]!;
    if (step instanceof Error) throw step;
    if (Array.isArray(step)) {
      return new Response(streamOf(step), { status: 200, headers: { "content-type": "text/event-stream" } });
    }
    return new Response(JSON.stringify(step.body), {
      status: step.status,
      headers: { "content-type": "application/json", ...step.headers },
    });
  };
  const client = new DegrauClient({
    baseUrl: "http://degrau.test/",
    tenant: "acme",
    fetch,
    now: () => clock,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock += ms;
    },
    random: () => 0,
    ...options,
  });
  return { client, requests, sleeps };
}

/** What a caller iterating the stream saw: the events, then what was thrown (undefined when the iteration ended). */
async function collect(stream: AsyncIterable<StreamEvent>): Promise<{ events: StreamEvent[]; thrown: unknown }> {
  const events: StreamEvent[] = [];
  try {
    for await (const event of stream) events.push(event);
  } catch (thrown) {
    return { events, thrown };
  }
  return { events, thrown: undefined };
}

describe("streamMessage", () => {
  it("yields the round's typed events and ends at done", async () => {
    const { client, requests } = mockClient([cut(roundBody(), 40, 41, 200)]);
    const { events, thrown } = await collect(client.streamMessage("+55 11@wa:1", "hello", { idempotencyKey: "turn-1" }));
    assert.equal(thrown, undefined);
    assert.deepEqual(events, ROUND_EVENTS);
    assert.equal(requests.length, 1);
    const [request] = requests;
    assert.equal(request!.url, "http://degrau.test/v1/contacts/%2B55%2011%40wa%3A1/messages/stream");
    assert.deepEqual(JSON.parse(request!.body), { text: "hello" });
    assert.equal(request!.headers.get("accept"), "text/event-stream");
    assert.equal(request!.headers.get("content-type"), "application/json");
    assert.equal(request!.headers.get("idempotency-key"), "turn-1");
    assert.equal(request!.headers.get("x-tenant-id"), "acme");
  });

  for (const [name, end] of [
    ["\\n", "\n"],
    ["\\r\\n", "\r\n"],
    ["\\r", "\r"],
  ] as const) {
    it(`reads the same events however the body is cut (lines ending ${name})`, async () => {
      const body = roundBody(end);
      for (let at = 1; at < body.length; at++) {
        const { events } = await collect(mockClient([cut(body, at)]).client.streamMessage("ana", "hello"));
        assert.deepEqual(events, ROUND_EVENTS, `cut at ${at}: ${JSON.stringify(new TextDecoder().decode(body.slice(0, at)))}`);
      }
      const oneByOne = Array.from(body, (byte) => Uint8Array.of(byte));
      assert.deepEqual((await collect(mockClient([oneByOne]).client.streamMessage("ana", "hello"))).events, ROUND_EVENTS);
    });
  }

  it("decodes Server-Sent Events as the standard does", () => {
    const decoder = new SseDecoder();
    const text =
      "\ufeffdata: one\ndata:two\n\n" + // a byte order mark; two data lines; no space after the colon
      "event: named\nid: 7\nretry: 10\nunknown\ndata:  padded\n\n" + // ignored fields; one space is dropped
      "event: empty\n\n" + // no data: not dispatched, and its name does not leak
      "data: after\n\n" +
      "event: unfinished\ndata: never ends";
    assert.deepEqual(decoder.feed(encoder.encode(text)), [
      { event: "message", data: "one\ntwo" },
      { event: "named", data: " padded" },
      { event: "message", data: "after" },
    ]);
    assert.deepEqual(decoder.feed(encoder.encode("\n")), []);
    assert.deepEqual(decoder.feed(encoder.encode("\n")), [{ event: "unfinished", data: "never ends" }]);
    // A "\r" ending one read and a "\n" opening a later one are one line end, empty reads between.
    const reads = ["data: x\r", "", "\ndata: y\n\n"].flatMap((chunk) => decoder.feed(encoder.encode(chunk)));
    assert.deepEqual(reads, [{ event: "message", data: "x\ny" }]);
  });

  it("yields done alone for a replay", async () => {
    const { client } = mockClient([[sse("done", ANSWER)]]);
    assert.deepEqual(await collect(client.streamMessage("ana", "hello", { idempotencyKey: "turn-1" })), {
      events: [{ type: "done", response: ANSWER }],
      thrown: undefined,
    });
  });

  it("reads nothing after done", async () => {
    const body = sse("done", ANSWER) + sse("delta", { text: "late", call: 0 }) + "event: error\ndata: {";
    const { client } = mockClient([[body]]);
    assert.deepEqual(await collect(client.streamMessage("ana", "hello")), {
      events: [{ type: "done", response: ANSWER }],
      thrown: undefined,
    });
  });

  it("throws a JSON error before the stream as its class", async () => {
    for (const type of Object.keys(STATUS) as ErrorType[]) {
      const { client } = mockClient([{ status: STATUS[type], body: envelope(type, `about ${type}`) }], { retries: 0 });
      const { events, thrown } = await collect(client.streamMessage("ana", "hello"));
      assert.deepEqual(events, []);
      assert.ok(thrown instanceof ERROR_CLASSES[type], `${String(thrown)} is ${type}`);
      assert.equal((thrown as APIStatusError).status, STATUS[type]);
      assert.equal((thrown as APIStatusError).message, `about ${type}`);
    }
  });

  it("retries a busy answer or a failed connection before the stream, with the same key", async () => {
    const { client, requests, sleeps } = mockClient([
      { status: 429, body: envelope("rate_limited"), headers: { "retry-after": "3" } },
      new TypeError("fetch failed"),
      { status: 503, body: envelope("unavailable"), headers: { "retry-after": "1" } },
      [roundBody()],
    ]);
    assert.deepEqual(await collect(client.streamMessage("ana", "hello")), { events: ROUND_EVENTS, thrown: undefined });
    const keys = requests.map((r) => r.headers.get("idempotency-key"));
    assert.equal(keys.length, 4);
    assert.match(keys[0]!, /^[0-9a-f-]{36}$/);
    assert.equal(new Set(keys).size, 1);
    assert.deepEqual(sleeps, [3000, 500, 1000]); // Retry-After; the second backoff step (1 s), halved by no jitter; Retry-After
  });

  it("throws an error event as its class after the events before it, and does not retry", async () => {
    const failure = { status: 503, error: { type: "unavailable", message: "the model is overloaded" } };
    const { client, requests, sleeps } = mockClient([[sse("delta", { text: "Olá", call: 0 }) + sse("error", failure)], [roundBody()]]);
    const { events, thrown } = await collect(client.streamMessage("ana", "hello"));
    assert.deepEqual(events, [{ type: "delta", text: "Olá", call: 0 }]);
    assert.ok(thrown instanceof Unavailable);
    assert.equal(thrown.status, 503);
    assert.equal(thrown.type, "unavailable");
    assert.equal(thrown.message, "the model is overloaded");
    assert.deepEqual(thrown.body, failure);
    assert.equal(requests.length, 1);
    assert.deepEqual(sleeps, []);
  });

  it("maps error events as the JSON route's statuses and types", async () => {
    for (const type of Object.keys(STATUS) as ErrorType[]) {
      const { client } = mockClient([[sse("error", { status: STATUS[type], error: { type, message: type } })]]);
      const { thrown } = await collect(client.streamMessage("ana", "hello"));
      assert.ok(thrown instanceof ERROR_CLASSES[type], type);
      assert.equal((thrown as APIStatusError).status, STATUS[type]);
    }
    const { client } = mockClient([[sse("error", { status: 507, error: { type: "novel_error", message: "new" } })]]);
    const { thrown } = await collect(client.streamMessage("ana", "hello"));
    assert.ok(thrown instanceof APIStatusError && thrown instanceof DegrauError);
    assert.equal(thrown.constructor, APIStatusError);
    assert.equal(thrown.status, 507);
    assert.equal(thrown.message, "new");
  });

  it("throws StreamInterrupted with the key when the stream ends before done, and does not retry", async () => {
    const delta = sse("delta", { text: "Olá", call: 0 });
    for (const chunks of [[delta], [delta, 'event: done\ndata: {"session"'], [delta, new TypeError("terminated")]] as Chunks[]) {
      const { client, requests, sleeps } = mockClient([chunks, [roundBody()]]);
      const { events, thrown } = await collect(client.streamMessage("ana", "hello"));
      assert.deepEqual(events, [{ type: "delta", text: "Olá", call: 0 }]);
      assert.ok(thrown instanceof StreamInterrupted, String(thrown));
      const key = requests[0]!.headers.get("idempotency-key")!;
      assert.equal(thrown.idempotencyKey, key);
      assert.ok(thrown.message.includes(key));
      assert.equal(requests.length, 1);
      assert.deepEqual(sleeps, []);
    }
  });

  it("goes to streamBaseUrl, the other routes to baseUrl", async () => {
    const urls: string[] = [];
    const fetch = async (request: Request): Promise<Response> => {
      urls.push(request.url);
      if (request.url.endsWith("/stream")) return new Response(sse("done", ANSWER), { headers: { "content-type": "text/event-stream" } });
      return new Response("{}", { headers: { "content-type": "application/json" } });
    };
    const split = new DegrauClient({ baseUrl: "http://degrau.test", streamBaseUrl: "https://stream.example/prod/", fetch });
    assert.equal((await collect(split.streamMessage("ana", "hi"))).events.length, 1);
    await split.memory("ana");
    const same = new DegrauClient({ baseUrl: "http://degrau.test/", fetch });
    assert.equal((await collect(same.streamMessage("ana", "hi"))).events.length, 1);
    assert.deepEqual(urls, [
      "https://stream.example/prod/v1/contacts/ana/messages/stream",
      "http://degrau.test/v1/contacts/ana/memory",
      "http://degrau.test/v1/contacts/ana/messages/stream",
    ]);
  });
});

// A real server: the events reach the caller as they are sent.

/** What the server does, in order: write a chunk, wait for a promise, or destroy the connection. */
type Action = string | Promise<unknown> | "drop";

const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

async function serve(actions: Action[]): Promise<string> {
  const server = createServer(async (request, response) => {
    for await (const _ of request);
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    response.flushHeaders();
    for (const action of actions) {
      if (action === "drop") {
        response.socket?.destroy();
        return;
      }
      if (typeof action === "string") response.write(action);
      else await action;
    }
    response.end();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("streamMessage on a real server", () => {
  it("hands a delta over while the round is still running", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The server holds done back until the caller has the delta; a client that
    // waited for the whole body would wait until the timeout instead.
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve("timed out"), 5_000).unref());
    const waited = Promise.race([held.then(() => "released"), timeout]);
    const url = await serve([sse("delta", { text: "Olá", call: 0 }), waited, sse("done", ANSWER)]);
    const events: StreamEvent[] = [];
    for await (const event of new DegrauClient({ baseUrl: url, retries: 0 }).streamMessage("ana", "hello")) {
      events.push(event);
      release();
    }
    assert.equal(await waited, "released");
    assert.deepEqual(events, [
      { type: "delta", text: "Olá", call: 0 },
      { type: "done", response: ANSWER },
    ]);
  });

  it("reads a round longer than the deadline: the deadline bounds only its start", async () => {
    const url = await serve([sse("delta", { text: "Olá", call: 0 }), new Promise((resolve) => setTimeout(resolve, 600)), sse("done", ANSWER)]);
    const { events, thrown } = await collect(new DegrauClient({ baseUrl: url, deadlineMs: 200 }).streamMessage("ana", "hello"));
    assert.equal(thrown, undefined);
    assert.equal(events.length, 2);
  });

  it("throws StreamInterrupted when the connection drops mid-stream", async () => {
    const url = await serve([sse("delta", { text: "Olá", call: 0 }), new Promise((resolve) => setTimeout(resolve, 50)), "drop"]);
    const { events, thrown } = await collect(new DegrauClient({ baseUrl: url }).streamMessage("ana", "hello", { idempotencyKey: "turn-9" }));
    assert.deepEqual(events, [{ type: "delta", text: "Olá", call: 0 }]);
    assert.ok(thrown instanceof StreamInterrupted, String(thrown));
    assert.equal(thrown.idempotencyKey, "turn-9");
    assert.ok(thrown.cause !== undefined);
  });

  it("ends with the caller's own abort, thrown as it is", async () => {
    const url = await serve([sse("delta", { text: "Olá", call: 0 }), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    const stop = new AbortController();
    const events: StreamEvent[] = [];
    const { thrown } = await collect(
      (async function* () {
        for await (const event of new DegrauClient({ baseUrl: url }).streamMessage("ana", "hello", { signal: stop.signal })) {
          events.push(event);
          stop.abort();
          yield event;
        }
      })(),
    );
    assert.equal(events.length, 1);
    assert.ok(thrown instanceof Error && thrown.name === "AbortError", String(thrown));
  });
});
