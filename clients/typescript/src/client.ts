/**
 * The HTTP client: one method per route of degrau's API (`docs/openapi.json`),
 * typed from the generated `schema.ts` through openapi-fetch.
 */

import createClient from "openapi-fetch";

import { errorFromResponse } from "./errors.js";
import { retryingFetch, type RetryOptions } from "./retry.js";
import type { MessageInput, UsageInput } from "./rounds.js";
import type { components, paths } from "./schema.js";
import { readStream, type StreamEvent } from "./stream.js";

type Schemas = components["schemas"];
/** What the contact's next model request should carry (`GET .../context`). */
export type Context = Schemas["ContextView"];
/** A committed round (`POST .../rounds`). */
export type RecordedRound = Schemas["RecordedRound"];
/** degrau's answer to a message (`POST .../messages`). */
export type AskResponse = Schemas["AskResponse"];
/** One page of the transcript (`GET .../messages`). */
export type TranscriptPage = Schemas["TranscriptPage"];
/** A message of the transcript. */
export type TranscriptMessage = Schemas["TranscriptMessage"];
/** The session state and facts (`GET .../memory`). */
export type MemoryView = Schemas["MemoryView"];
/** The answer to an erase (`DELETE /v1/contacts/{contact}`). */
export type Erased = Schemas["Erased"];
/** One page of the tenant's contacts (`GET /v1/contacts`), most recently active first. */
export type ContactPage = Schemas["ContactPage"];
/** A contact of {@link ContactPage}. */
export type ContactSummary = Schemas["ContactSummary"];
/** A fact with who set it, when, when it expires, and its earlier values. */
export type OperatorFact = Schemas["OperatorFact"];
/** The answer to a fact's deletion. */
export type FactDeleted = Schemas["FactDeleted"];
/** A tenant's configuration, as `PUT /v1/tenant/config` takes it. */
export type TenantConfig = Schemas["TenantConfig"];
/** The stored configuration, its `etag`, and whether it reads. */
export type TenantConfigView = Schemas["TenantConfigView"];
/** `GET /v1/usage`: the days of `from`..`to` with any consumption. */
export type UsageReport = Schemas["Usage"];
/** One UTC day of {@link UsageReport}. */
export type UsageDay = Schemas["UsageDay"];
/** The answer to closing a contact's session (`POST .../sessions`). */
export type SessionClosed = Schemas["SessionClosed"];
/** The records of a contact's earlier sessions (`GET .../sessions`). */
export type SessionRecords = Schemas["SessionRecords"];
/** What degrau keeps of a closed session to find it again. */
export type SessionRecord = Schemas["SessionRecord"];
/** Which session a transcript reads: a number, `"current"` or `"all"`. */
export type SessionSelector = number | "current" | "all";

/** How to reach degrau. */
export interface DegrauClientOptions extends RetryOptions {
  /** The API's base URL, e.g. `http://127.0.0.1:9000` or the stage's invoke URL. */
  baseUrl: string;
  /**
   * Where {@link DegrauClient.streamMessage} goes: on AWS the streaming route is
   * served by an API of its own. Default `baseUrl` (the local stack serves both).
   */
  streamBaseUrl?: string;
  /** Sends `X-Tenant-Id` (the local stack's `AUTH_MODE=dev`). */
  tenant?: string;
  /**
   * Sends `Authorization: Bearer` (`AUTH_MODE=jwt`, API Gateway's JWT authorizer; the
   * operator routes read their scopes from it): the token, or a function answering
   * the current one (called for every attempt, so a long-running worker refreshes
   * an expired Cognito token; as the Anthropic SDK's `apiKey` provider).
   */
  token?: string | (() => string | Promise<string>);
  /**
   * Sends `X-Scopes` (`AUTH_MODE=dev`): the operator routes' scopes, any of
   * `memory:read`, `memory:write`, `tenant:admin` (a list, or one string separated by spaces).
   */
  scopes?: string | readonly string[];
  /** Sends `X-Operator` (`AUTH_MODE=dev`): the operator id recorded on the facts it sets (the server's default `dev`). */
  operator?: string;
  /** The `fetch` to use (default `globalThis.fetch`; tests pass a fake one). */
  fetch?: (request: Request) => Promise<Response>;
}

/** Per-call options of the POST routes. */
export interface PostOptions {
  /** The `Idempotency-Key`; a new `crypto.randomUUID()` per call when not given. */
  idempotencyKey?: string;
}

/** Per-call options of {@link DegrauClient.streamMessage}. */
export interface StreamOptions extends PostOptions {
  /** Aborts the request, or the reading of its stream (the round goes on and is stored). */
  signal?: AbortSignal;
}

/** The answer openapi-fetch gives, reduced to what `unwrap` needs. */
interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * A client of degrau's HTTP API. Every error answer is thrown as the
 * `APIStatusError` subclass of its type, no answer as `APIConnectionError`
 * (`APITimeoutError` past the deadline), all `DegrauError`s carrying `requestId`;
 * retries follow `x-degrau-retry` ({@link RetryOptions}).
 */
export class DegrauClient {
  readonly #http: ReturnType<typeof createClient<paths>>;
  readonly #now: () => number;
  readonly #headers: Record<string, string>;
  readonly #streamBaseUrl: string;
  readonly #streamFetch: (request: Request) => Promise<Response>;

  constructor(options: DegrauClientOptions) {
    const headers: Record<string, string> = { accept: "application/json" };
    if (options.tenant !== undefined) headers["x-tenant-id"] = options.tenant;
    if (typeof options.token === "string") headers["authorization"] = `Bearer ${options.token}`;
    if (options.scopes !== undefined) {
      headers["x-scopes"] = typeof options.scopes === "string" ? options.scopes : options.scopes.join(" ");
    }
    if (options.operator !== undefined) headers["x-operator"] = options.operator;
    // Looked up at call time, so a caller (or test) replacing globalThis.fetch is honoured.
    const send = options.fetch ?? ((request: Request) => globalThis.fetch(request));
    const provider = typeof options.token === "function" ? options.token : undefined;
    // Every attempt asks the token provider for the current token.
    const inner =
      provider === undefined
        ? send
        : async (request: Request): Promise<Response> => {
            const token = await provider();
            if (typeof token !== "string" || token === "") throw new TypeError("the token provider answered no token");
            request.headers.set("authorization", `Bearer ${token}`);
            return send(request);
          };
    this.#now = options.now ?? Date.now;
    this.#headers = headers;
    this.#http = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers,
      fetch: retryingFetch(inner, options),
    });
    this.#streamBaseUrl = (options.streamBaseUrl ?? options.baseUrl).replace(/\/+$/, "");
    this.#streamFetch = retryingFetch(inner, options, { streams: true });
  }

  /** The data of a success, or the error answer thrown as its class. */
  #unwrap<T>(result: FetchResult<T>): T {
    if (result.response.ok) return result.data as T;
    throw errorFromResponse(result.response, result.error, this.#now());
  }

  /**
   * `POST /v1/contacts/{contact}/messages`: degrau runs the model and the tools
   * and commits the round.
   */
  async sendMessage(contact: string, text: string, options: PostOptions = {}): Promise<AskResponse> {
    return this.#unwrap(
      await this.#http.POST("/v1/contacts/{contact}/messages", {
        params: { path: { contact }, header: { "Idempotency-Key": idempotencyKey(options) } },
        body: { text },
      }),
    );
  }

  /**
   * `POST /v1/contacts/{contact}/messages/stream`: {@link sendMessage}'s round, its
   * events as they happen (`for await`): `delta`s, `tool_started` / `tool_finished`,
   * `restart` (forget what was shown), and last `done`, whose `response` is what
   * `sendMessage` returns.
   *
   * The request goes when the iteration starts. An error before the stream began is
   * thrown as `sendMessage` throws it, after the same retries (same
   * `Idempotency-Key`); once the stream began nothing is retried: an `error` event
   * throws the class of its type, and a stream cut before `done` throws
   * `StreamInterrupted` carrying the key to replay it with. The deadline
   * (`deadlineMs`) bounds the wait for the stream to begin, not the round; `signal`
   * aborts either. Leaving the loop early closes the connection; the round goes on
   * and is stored.
   */
  async *streamMessage(
    contact: string,
    text: string,
    options: StreamOptions = {},
  ): AsyncGenerator<StreamEvent, void, undefined> {
    const key = idempotencyKey(options);
    const request = new Request(
      `${this.#streamBaseUrl}/v1/contacts/${encodeURIComponent(contact)}/messages/stream`,
      {
        method: "POST",
        headers: {
          ...this.#headers,
          accept: "text/event-stream",
          "content-type": "application/json",
          "idempotency-key": key,
        },
        body: JSON.stringify({ text }),
        signal: options.signal,
      },
    );
    const response = await this.#streamFetch(request);
    if (!response.ok) {
      const body = await response.text();
      let parsed: unknown = body;
      try {
        parsed = JSON.parse(body);
      } catch {
        // Not the envelope (a proxy's page): the text is the message.
      }
      throw errorFromResponse(response, parsed, this.#now());
    }
    yield* readStream(response.body, key, options.signal);
  }

  /** `GET /v1/contacts/{contact}/messages`: one page, oldest first. */
  async transcript(
    contact: string,
    query: { session?: SessionSelector; limit?: number; before?: string } = {},
  ): Promise<TranscriptPage> {
    return this.#unwrap(
      await this.#http.GET("/v1/contacts/{contact}/messages", {
        params: {
          path: { contact },
          query: { session: query.session?.toString(), limit: query.limit, before: query.before },
        },
      }),
    );
  }

  /** Every message of the transcript (all pages, newest page first read), oldest first. */
  async transcriptMessages(
    contact: string,
    query: { session?: SessionSelector } = {},
  ): Promise<TranscriptMessage[]> {
    const pages: TranscriptMessage[][] = [];
    let before: string | undefined;
    do {
      const page = await this.transcript(contact, { session: query.session, before });
      pages.push(page.messages);
      before = page.next_before ?? undefined;
    } while (before);
    return pages.reverse().flat();
  }

  /** `GET /v1/contacts/{contact}/memory`: the session, summary and facts. */
  async memory(contact: string): Promise<MemoryView> {
    return this.#unwrap(
      await this.#http.GET("/v1/contacts/{contact}/memory", { params: { path: { contact } } }),
    );
  }

  /**
   * `GET /v1/contacts/{contact}/context`: the `system` blocks and the window's
   * `messages` the next model request should carry, and the `head` to commit on.
   */
  async context(contact: string): Promise<Context> {
    return this.#unwrap(
      await this.#http.GET("/v1/contacts/{contact}/context", { params: { path: { contact } } }),
    );
  }

  /**
   * `POST /v1/contacts/{contact}/rounds`: commits a round the caller ran itself
   * (the user message, each assistant reply, each message of tool results) with
   * the last model call's usage, both sent as given: `messages` may hold the SDK's
   * `message.content` and `usage` may be the SDK's `message.usage`, untouched (the
   * server reads past what degrau does not store; see `rounds.ts`), or `null` when
   * the caller has none: degrau then estimates the context from what it holds and
   * says so (`usage_estimated`), so compaction still happens.
   * A stale `head` throws `Conflict`: read the context again, rerun the round.
   */
  async commitRound(
    contact: string,
    head: string,
    messages: Iterable<MessageInput>,
    usage: UsageInput | null | undefined,
    options: PostOptions = {},
  ): Promise<RecordedRound> {
    const body: Schemas["RoundBody"] = {
      head,
      // Sent as given. The one place the types part: a MessageInput's blocks may be
      // of any type (the SDK's message.content), which the server checks, naming a
      // block it refuses in its 400 (see rounds.ts).
      messages: Array.from(messages) as Schemas["RoundMessage"][],
    };
    // None: degrau estimates the context from what it holds (`usage_estimated`).
    if (usage !== null && usage !== undefined) body.usage = usage;
    return this.#unwrap(
      await this.#http.POST("/v1/contacts/{contact}/rounds", {
        params: { path: { contact }, header: { "Idempotency-Key": idempotencyKey(options) } },
        body,
      }),
    );
  }

  /**
   * `GET /v1/contacts/{contact}/sessions`: the records of the contact's earlier
   * sessions (recall), those matching `q` best first, or the newest first without
   * it; at most `limit` (1 to 20, default 5).
   */
  async searchSessions(contact: string, query: { q?: string; limit?: number } = {}): Promise<SessionRecords> {
    return this.#unwrap(
      await this.#http.GET("/v1/contacts/{contact}/sessions", {
        params: { path: { contact }, query: { q: query.q, limit: query.limit } },
      }),
    );
  }

  /**
   * `POST /v1/contacts/{contact}/sessions`: closes the contact's session now, as its
   * idle timeout would (its record kept, its facts extracted); the next round opens
   * a new session with the facts and no window or summary. Nothing is erased (see
   * {@link erase}). Closing a session with no message closes nothing
   * (`closed_session: null`), so repeating it is safe.
   */
  async closeSession(contact: string): Promise<SessionClosed> {
    return this.#unwrap(
      await this.#http.POST("/v1/contacts/{contact}/sessions", { params: { path: { contact } } }),
    );
  }

  /** `DELETE /v1/contacts/{contact}`: erases everything stored about the contact, for good. */
  async erase(contact: string): Promise<Erased> {
    return this.#unwrap(
      await this.#http.DELETE("/v1/contacts/{contact}", { params: { path: { contact } } }),
    );
  }

  /**
   * `GET /v1/contacts` (scope `memory:read`): one page of the tenant's contacts,
   * most recently active first; pass its `next_cursor` as `cursor` for the next.
   */
  async listContacts(query: { limit?: number; cursor?: string } = {}): Promise<ContactPage> {
    return this.#unwrap(await this.#http.GET("/v1/contacts", { params: { query } }));
  }

  /** Every contact of the tenant, most recently active first, each page read when the iteration reaches it. */
  async *iterContacts(query: { limit?: number } = {}): AsyncGenerator<ContactSummary, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listContacts({ limit: query.limit, cursor });
      yield* page.contacts;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /**
   * `GET /v1/contacts/{contact}/facts` (scope `memory:read`): the facts with who
   * set each (the model at which message, or an operator), when, when it expires,
   * and its earlier values.
   */
  async listFacts(contact: string): Promise<OperatorFact[]> {
    const list = this.#unwrap(
      await this.#http.GET("/v1/contacts/{contact}/facts", { params: { path: { contact } } }),
    );
    return list.facts;
  }

  /**
   * `PUT /v1/contacts/{contact}/facts/{key}` (scope `memory:write`): sets or
   * corrects a fact as an operator, under the tenant's fact policy (a key not
   * allowed, or a value it refuses, throws `InvalidRequest` naming the rule).
   * A later extraction replaces it only citing a later message.
   */
  async putFact(contact: string, key: string, value: string): Promise<OperatorFact> {
    return this.#unwrap(
      await this.#http.PUT("/v1/contacts/{contact}/facts/{key}", { params: { path: { contact, key } }, body: { value } }),
    );
  }

  /** `DELETE /v1/contacts/{contact}/facts/{key}` (scope `memory:write`): the fact and its earlier values. */
  async deleteFact(contact: string, key: string): Promise<FactDeleted> {
    return this.#unwrap(
      await this.#http.DELETE("/v1/contacts/{contact}/facts/{key}", { params: { path: { contact, key } } }),
    );
  }

  /** `GET /v1/tenant/config` (scope `tenant:admin`): the stored configuration, its `etag`, and whether it reads. */
  async getTenantConfig(): Promise<TenantConfigView> {
    return this.#unwrap(await this.#http.GET("/v1/tenant/config"));
  }

  /**
   * `PUT /v1/tenant/config` (scope `tenant:admin`): replaces the configuration,
   * validated in full first (`InvalidRequest` naming the entry and the field), if
   * `etag` (from {@link getTenantConfig}; `"v0"` with its quotes when none is
   * stored) is still the stored version; else `PreconditionFailed`: read it again
   * and reapply. (A retry of a change whose answer was lost also gets
   * `PreconditionFailed`: read the configuration to see which won.)
   */
  async putTenantConfig(config: TenantConfig, etag: string): Promise<TenantConfigView> {
    return this.#unwrap(
      await this.#http.PUT("/v1/tenant/config", { params: { header: { "If-Match": etag } }, body: config }),
    );
  }

  /**
   * `GET /v1/usage` (scope `tenant:admin`): the tenant's consumption per UTC day
   * from `from` to `to` inclusive (a `Date`, read as its UTC day, or
   * `YYYY-MM-DD`; the server's default: the last seven days).
   */
  async getUsage(range: { from?: Date | string; to?: Date | string } = {}): Promise<UsageReport> {
    return this.#unwrap(
      await this.#http.GET("/v1/usage", { params: { query: { from: utcDay(range.from), to: utcDay(range.to) } } }),
    );
  }

  /** `GET /v1/openapi.json`: the API's OpenAPI 3.1 description. */
  async openapi(): Promise<Record<string, unknown>> {
    return this.#unwrap(await this.#http.GET("/v1/openapi.json")) as Record<string, unknown>;
  }
}

/** A UTC day as the API writes it (`YYYY-MM-DD`). */
function utcDay(day: Date | string | undefined): string | undefined {
  return day instanceof Date ? day.toISOString().slice(0, 10) : day;
}

/** The caller's key, or a fresh one: every POST carries a key, so every POST may be retried. */
function idempotencyKey(options: PostOptions): string {
  return options.idempotencyKey ?? globalThis.crypto.randomUUID();
}

