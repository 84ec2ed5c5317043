/**
 * Streamed replies (`POST /v1/contacts/{contact}/messages/stream`): the typed
 * events, the reading of Server-Sent Events from a body however it is cut, and what
 * each event means to the caller.
 *
 * The route answers a round as it happens: `delta` (answer text as the model writes
 * it), `tool_started` / `tool_finished`, `restart` (forget what was shown, the round
 * starts over), then `done` (exactly `sendMessage`'s answer; the round is stored) or
 * `error` (nothing was stored). Comment lines and unknown event names are skipped, so
 * a newer server's events do not break an older client.
 *
 * Each event's data is typed from the generated schema (`StreamDelta`,
 * `StreamToolStarted`, `StreamToolFinished`, `StreamRestart` in
 * `docs/openapi.json`), tagged with its event name as `type`.
 */

import { errorFromBody } from "./errors.js";
import type { components } from "./schema.js";

type Schemas = components["schemas"];
/**
 * The `done` event's answer: the JSON route's 200 body (the same type as the
 * client's `AskResponse`, named from the schema here so that this module does not
 * import the client, which imports it).
 */
type AskResponse = Schemas["AskResponse"];

/** Answer text as the model writes it; `call` is which model call of the round wrote it (0, 1, …: a tool round's answer after the tool is call 1). */
export type TextDelta = { type: "delta" } & Schemas["StreamDelta"];

/** A tool call is about to run; `input` only when the tenant's configuration has `"stream_tool_input": true`. */
export type ToolStarted = { type: "tool_started" } & Schemas["StreamToolStarted"];

/** A tool call ran; `is_error`: it answered an error (the model sees it). */
export type ToolFinished = { type: "tool_finished" } & Schemas["StreamToolFinished"];

/**
 * Everything the stream showed so far is void: the round's events start over from
 * the beginning (rare: a commit race answered again, a cut-off tool call asked
 * again). A chat clears the answer it showed.
 */
export type Restart = { type: "restart" } & Schemas["StreamRestart"];

/** The round is stored; the last event. `response` is exactly what `sendMessage` returns. */
export interface Done {
  type: "done";
  response: AskResponse;
}

/** One event of a streamed round, told apart by `type` (the event's name on the wire). */
export type StreamEvent = TextDelta | ToolStarted | ToolFinished | Restart | Done;

/**
 * The stream ended (the connection dropped or closed) before its `done` or `error`
 * event. The round goes on on the server and is stored whole or not at all: send the
 * same request again with `idempotencyKey` (the caller's, or the one the client made
 * for the call) to get its `done` (a replay), or a `Conflict` while it still runs.
 */
export class StreamInterrupted extends Error {
  /** The `Idempotency-Key` the request was sent with. */
  readonly idempotencyKey: string;

  constructor(why: string, idempotencyKey: string, cause?: unknown) {
    super(
      `${why}; the round is stored whole or not at all: send it again with idempotencyKey ${JSON.stringify(idempotencyKey)} to read its answer`,
      { cause },
    );
    this.name = "StreamInterrupted";
    this.idempotencyKey = idempotencyKey;
  }
}

/** One dispatched Server-Sent Event: its name (`message` when unnamed) and its data lines joined by newlines. */
export interface ServerSentEvent {
  event: string;
  data: string;
}

/** A line's end: CRLF, LF, or CR alone. */
const LINE_END = /\r\n|\r|\n/g;

/**
 * The Server-Sent Events of a byte stream, as the WHATWG rules read them: lines end
 * with `\r\n`, `\n` or `\r`; a blank line dispatches the event; `:` starts a
 * comment; a field's value loses one leading space; an event without data is
 * dropped, as is an unfinished one when the stream ends. The bytes are decoded as a
 * stream, so a chunk that ends inside a UTF-8 character, a line, or between the `\r`
 * and `\n` of one line end reads the same as the whole.
 */
export class SseDecoder {
  readonly #text = new TextDecoder("utf-8", { ignoreBOM: false });
  #pending = "";
  /** The last chunk ended with `\r`: a `\n` opening the next is that line's end. */
  #afterCr = false;
  #event = "";
  #data: string[] = [];

  /** The events `chunk` completes. */
  feed(chunk: Uint8Array): ServerSentEvent[] {
    let text = this.#text.decode(chunk, { stream: true });
    if (this.#afterCr && text.startsWith("\n")) text = text.slice(1);
    if (text === "") return [];
    this.#afterCr = false;
    this.#pending += text;
    const events: ServerSentEvent[] = [];
    let start = 0;
    LINE_END.lastIndex = 0;
    for (let end = LINE_END.exec(this.#pending); end !== null; end = LINE_END.exec(this.#pending)) {
      if (end[0] === "\r" && LINE_END.lastIndex === this.#pending.length) this.#afterCr = true;
      const event = this.#line(this.#pending.slice(start, end.index));
      if (event !== undefined) events.push(event);
      start = LINE_END.lastIndex;
    }
    this.#pending = this.#pending.slice(start);
    return events;
  }

  #line(line: string): ServerSentEvent | undefined {
    if (line === "") {
      const event = this.#data.length === 0 ? undefined : { event: this.#event || "message", data: this.#data.join("\n") };
      this.#event = "";
      this.#data = [];
      return event;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") this.#event = value;
    else if (name === "data") this.#data.push(value);
    // "id", "retry" and unknown fields mean nothing to this route.
    return undefined;
  }
}

function object(sse: ServerSentEvent): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(sse.data);
  } catch (error) {
    throw new Error(`the stream's ${sse.event} event holds no JSON: ${sse.data.slice(0, 200)}`, { cause: error });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`the stream's ${sse.event} event holds no JSON object: ${sse.data.slice(0, 200)}`);
  }
  return value as Record<string, unknown>;
}

/**
 * The typed event of one Server-Sent Event; `undefined` for a name this client does
 * not know (skipped). An `error` event is thrown as the `APIStatusError` class its
 * status and type name, as the JSON route would have thrown it.
 */
export function streamEvent(sse: ServerSentEvent): StreamEvent | undefined {
  switch (sse.event) {
    case "delta": {
      const data = object(sse);
      return { type: "delta", text: String(data.text), call: typeof data.call === "number" ? data.call : 0 };
    }
    case "tool_started": {
      const data = object(sse);
      const event: ToolStarted = { type: "tool_started", id: String(data.id), name: String(data.name) };
      if (typeof data.input === "object" && data.input !== null) event.input = data.input as Record<string, unknown>;
      return event;
    }
    case "tool_finished": {
      const data = object(sse);
      return { type: "tool_finished", id: String(data.id), name: String(data.name), is_error: data.is_error === true };
    }
    case "restart":
      return { type: "restart", reason: String(object(sse).reason ?? "") };
    case "done":
      return { type: "done", response: object(sse) as unknown as AskResponse };
    case "error": {
      const data = object(sse);
      throw errorFromBody(typeof data.status === "number" ? data.status : 500, data, sse.data);
    }
    default:
      return undefined;
  }
}

/**
 * The events of a streamed round's body, ending at `done`; an `error` event thrown
 * as its class; {@link StreamInterrupted} when the body ends, or its connection
 * fails, before either. `signal` is the caller's: its abort is thrown as it is.
 * Leaving the iteration early cancels the body (closes the connection).
 */
export async function* readStream(
  body: ReadableStream<Uint8Array> | null,
  idempotencyKey: string,
  signal?: AbortSignal,
): AsyncGenerator<StreamEvent, void, undefined> {
  if (body === null) throw new StreamInterrupted("the stream answered without a body", idempotencyKey);
  const reader = body.getReader();
  const decoder = new SseDecoder();
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (signal?.aborted) throw error;
        throw new StreamInterrupted(`the stream broke off (${String(error)})`, idempotencyKey, error);
      }
      if (chunk.done) throw new StreamInterrupted("the stream ended before its done or error event", idempotencyKey);
      for (const sse of decoder.feed(chunk.value)) {
        const event = streamEvent(sse);
        if (event === undefined) continue;
        yield event;
        if (event.type === "done") return;
      }
    }
  } finally {
    // Frees the connection when the caller left early, or after done.
    await reader.cancel().catch(() => undefined);
  }
}
