/**
 * Retries, as a `fetch` wrapper handed to openapi-fetch: every call of the client
 * goes through {@link retryingFetch}, which sends the request again when the
 * answer says it may succeed later, within a bound on attempts and a total deadline.
 *
 * What is retried: a connection that failed (`fetch` threw), 429 `rate_limited`,
 * 500 `internal_error`, 503 `unavailable` and 504 `model_timeout` — degrau wrote
 * nothing on any of them. Not the other 500, `tenant_config_invalid`: the tenant's
 * stored configuration does not read, and will not until an operator replaces it. Never another 4xx (the request itself is at fault, or
 * the head is stale: retrying cannot help), nor 502 (the model answered with an
 * error or a refusal; degrau already retried the model provider's transient errors
 * itself). A `POST` is retried only when it carries an `Idempotency-Key` (the
 * client always sends one), so a retry of a request that did land gets the stored
 * answer instead of a second round.
 *
 * When to retry: after `Retry-After` when the answer gave one (seconds or an HTTP
 * date), otherwise after an exponential backoff with jitter. An attempt whose wait
 * would end past the deadline is not made: the last answer stands.
 */

import { retryAfterSeconds } from "./errors.js";

/** How the client retries; every field has a default. */
export interface RetryOptions {
  /** Retries after the first attempt (default 3); 0 disables retrying. */
  retries?: number;
  /** Total time for one call, its retries and waits included, in ms (default 60,000). */
  deadlineMs?: number;
  /** The first backoff, in ms (default 500); doubled each retry. */
  backoffMs?: number;
  /** The longest backoff, in ms (default 8,000). */
  maxBackoffMs?: number;
  /** Waits `ms` milliseconds (tests inject a fake one). */
  sleep?: (ms: number) => Promise<void>;
  /** Milliseconds since the epoch (tests inject a fake clock). */
  now?: () => number;
  /** A number in [0, 1) for the jitter (tests inject a fixed one). */
  random?: () => number;
}

/** The statuses worth another attempt (see the module's documentation). */
const RETRYABLE_STATUSES = new Set([429, 500, 503, 504]);

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
  const retries = options.retries ?? 3;
  const deadlineMs = options.deadlineMs ?? 60_000;
  const backoffMs = options.backoffMs ?? 500;
  const maxBackoffMs = options.maxBackoffMs ?? 8_000;
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
        !request.signal.aborted && (response === undefined ? !isTimeout(failure) : await retryableAnswer(response));
      if (!mayRetry || !retryable || attempt >= retries) return settle(response, failure);
      const exponential = Math.min(maxBackoffMs, backoffMs * 2 ** attempt);
      // Equal jitter: between half and all of the step, so clients that failed
      // together spread out, and none retries at once.
      const backoff = exponential * (0.5 + random() / 2);
      const asked = response === undefined ? undefined : retryAfterSeconds(response.headers.get("retry-after"), now());
      const wait = asked === undefined ? backoff : asked * 1000;
      if (now() - start + wait >= deadlineMs) return settle(response, failure);
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
async function retryableAnswer(response: Response): Promise<boolean> {
  if (!RETRYABLE_STATUSES.has(response.status)) return false;
  if (response.status !== 500) return true;
  try {
    const body = (await response.clone().json()) as { error?: { type?: unknown } };
    return body.error?.type !== "tenant_config_invalid";
  } catch {
    return true; // not the envelope: a failure of degrau or before it
  }
}

/** The deadline's own abort (`AbortSignal.timeout`): the time is spent, no retry. */
function isTimeout(error: unknown): boolean {
  return error instanceof Error && error.name === "TimeoutError";
}

function settle(response: Response | undefined, failure: unknown): Response {
  if (response === undefined) throw failure;
  return response;
}
