/**
 * Retries, as a `fetch` wrapper handed to openapi-fetch: every call of the client
 * goes through {@link retryingFetch}, which sends the request again when the
 * answer says it may succeed later, within a bound on attempts and a total deadline.
 *
 * What is retried is `x-degrau-retry` (docs/openapi.json), the one policy of both
 * clients, generated into `retry-policy.ts`: a connection that failed (`fetch`
 * threw), an answer whose error type the policy marks (`rate_limited`,
 * `internal_error`, `unavailable`, `model_timeout`: degrau wrote nothing, or the
 * same key replays what it wrote), and an answer that is not degrau's envelope (API
 * Gateway's or a proxy's own) with a status the policy lists. Not
 * `tenant_config_invalid` (the stored configuration will not read until an operator
 * replaces it), `model_error`/`model_refused` (degrau already retried the model's
 * transient errors), `conflict` or any other 4xx. A `POST` is retried only when it
 * carries an `Idempotency-Key` (the client always sends one), so a retry of a
 * request that did land gets the stored answer instead of a second round. When no
 * answer came, the last failure is thrown as `APIConnectionError`
 * (`APITimeoutError` when the deadline passed), `fetch`'s error as its `cause`.
 *
 * When to retry: after `Retry-After` when the answer gave one (seconds or an HTTP
 * date), otherwise after an exponential backoff with jitter. An attempt whose wait
 * would end past the deadline is not made: the last answer stands.
 */

import { APIConnectionError, APITimeoutError, retryAfterSeconds } from "./errors.js";
import { RETRY_POLICY } from "./retry-policy.js";

/** How the client retries; every field has a default. */
export interface RetryOptions {
  /** Retries after the first attempt (default: the policy's, 3); 0 disables retrying. */
  retries?: number;
  /** Total time for one call, its retries and waits included, in ms (default: the policy's, 60,000). */
  deadlineMs?: number;
  /** The first backoff, in ms (default: the policy's, 500); doubled each retry. */
  backoffMs?: number;
  /** The longest backoff, in ms (default: the policy's, 8,000). */
  maxBackoffMs?: number;
  /** Waits `ms` milliseconds (tests inject a fake one). */
  sleep?: (ms: number) => Promise<void>;
  /** Milliseconds since the epoch (tests inject a fake clock). */
  now?: () => number;
  /** A number in [0, 1) for the jitter (tests inject a fixed one). */
  random?: () => number;
}

/** The error types worth another attempt, by the policy. */
const RETRYABLE_TYPES: ReadonlySet<string> = new Set(
  Object.entries(RETRY_POLICY.error_types)
    .filter(([, retry]) => retry)
    .map(([type]) => type),
);
/** The statuses worth another attempt when the answer is not degrau's envelope. */
const RETRYABLE_WITHOUT_ENVELOPE: ReadonlySet<number> = new Set(RETRY_POLICY.statuses_without_envelope);

const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether the method may be sent twice: safe methods, or a POST with a key. */
function replayable(request: Request): boolean {
  return request.method !== "POST" || request.headers.has("idempotency-key");
}

/**
 * A `fetch` that retries `inner` as the module's documentation says. Each attempt
 * is a fresh `Request` (a body is read once), aborted when the deadline passes.
 *
 * With `streams` (the streaming route) the deadline bounds each attempt only until
 * its answer begins: the body of a stream is read for as long as the round runs,
 * never retried, and cancelled only by the caller's own signal (the request's).
 */
export function retryingFetch(
  inner: (request: Request) => Promise<Response>,
  options: RetryOptions = {},
  { streams = false }: { streams?: boolean } = {},
): (request: Request) => Promise<Response> {
  const retries = options.retries ?? RETRY_POLICY.max_retries;
  const deadlineMs = options.deadlineMs ?? RETRY_POLICY.deadline_seconds * 1000;
  const backoffMs = options.backoffMs ?? RETRY_POLICY.initial_backoff_seconds * 1000;
  const maxBackoffMs = options.maxBackoffMs ?? RETRY_POLICY.max_backoff_seconds * 1000;
  const sleep = options.sleep ?? realSleep;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;

  return async (request: Request): Promise<Response> => {
    const start = now();
    const body = request.body === null ? undefined : await request.arrayBuffer();
    const mayRetry = retries > 0 && replayable(request);
    for (let attempt = 0; ; attempt++) {
      const remaining = Math.max(1, Math.ceil(deadlineMs - (now() - start)));
      const until = streams ? untilAnswer(remaining, request.signal) : { signal: AbortSignal.timeout(remaining), answered() {} };
      const attemptRequest = new Request(request.url, {
        method: request.method,
        headers: request.headers,
        body,
        // What a browser caller may have set through the client's options.
        credentials: request.credentials,
        cache: request.cache,
        redirect: request.redirect,
        referrerPolicy: request.referrerPolicy,
        keepalive: request.keepalive,
        signal: until.signal,
      });
      let response: Response | undefined;
      let failure: unknown;
      try {
        response = await inner(attemptRequest);
      } catch (error) {
        failure = error;
      } finally {
        until.answered();
      }
      // The caller's own abort (a stream's signal) ends the call, never retried.
      const retryable =
        !request.signal.aborted &&
        (response === undefined ? RETRY_POLICY.connection_errors && !isTimeout(failure) : await retryableAnswer(response));
      if (!mayRetry || !retryable || attempt >= retries) return settle(response, failure, request.signal);
      const exponential = Math.min(maxBackoffMs, backoffMs * 2 ** attempt);
      // Equal jitter: between half and all of the step, so clients that failed
      // together spread out, and none retries at once.
      const backoff = exponential * (0.5 + random() / 2);
      const asked = response === undefined ? undefined : retryAfterSeconds(response.headers.get("retry-after"), now());
      const wait = asked === undefined ? backoff : asked * 1000;
      if (now() - start + wait >= deadlineMs) return settle(response, failure, request.signal);
      // Free the connection of an answer we will not read.
      await response?.body?.cancel();
      await sleep(wait);
    }
  };
}

/**
 * A signal for one attempt of a stream: aborted as the deadline's own
 * (`TimeoutError`) if no answer began within `ms`, and whenever the caller's
 * `signal` aborts, the body's reading included. `answered()` stops the deadline.
 */
function untilAnswer(ms: number, caller: AbortSignal): { signal: AbortSignal; answered(): void } {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException("the deadline passed before the stream began", "TimeoutError")),
    ms,
  );
  const forward = () => controller.abort(caller.reason);
  if (caller.aborted) forward();
  else caller.addEventListener("abort", forward, { once: true });
  return { signal: controller.signal, answered: () => clearTimeout(timer) };
}

/** Whether another attempt may get another answer (see the module's documentation). */
export async function retryableAnswer(response: Response): Promise<boolean> {
  if (response.status < 400) return false;
  let type: unknown;
  try {
    const body = (await response.clone().json()) as { error?: { type?: unknown } };
    type = body?.error?.type;
  } catch {
    type = undefined; // not JSON: not the envelope
  }
  if (typeof type === "string") return RETRYABLE_TYPES.has(type);
  return RETRYABLE_WITHOUT_ENVELOPE.has(response.status);
}

/** The deadline's own abort (`AbortSignal.timeout`): the time is spent, no retry. */
function isTimeout(error: unknown): boolean {
  return error instanceof Error && error.name === "TimeoutError";
}

/**
 * The answer, or the failure as the client's typed error: the caller's own abort
 * as it is (the caller asked for it), the deadline's as `APITimeoutError`, any
 * other as `APIConnectionError`.
 */
function settle(response: Response | undefined, failure: unknown, caller: AbortSignal): Response {
  if (response !== undefined) return response;
  if (caller.aborted) throw failure;
  if (isTimeout(failure)) throw new APITimeoutError("degrau did not answer before the deadline", { cause: failure });
  throw new APIConnectionError(`could not reach degrau: ${String(failure)}`, { cause: failure });
}
