/**
 * The errors the client throws: {@link DegrauError} the root; {@link APIStatusError}
 * for an error answer, one class per error type `docs/openapi.json` documents
 * (`components.schemas.Error`); {@link APIConnectionError} (and
 * {@link APITimeoutError}) when no answer came. Every one carries `requestId`.
 *
 * Every error degrau answers is `{"error": {"type", "message"}}` with a status;
 * {@link errorFromResponse} builds the class of its type, carrying the status, the
 * type, the message and `Retry-After` (in seconds) when the response gave one. An
 * answer that is not the envelope (API Gateway's own `{"message":"Unauthorized"}`,
 * a proxy's HTML page) is a plain `APIStatusError` of type `"unknown"`.
 */

import type { components } from "./schema.js";

/** The error types the API documents. */
export type ErrorType = components["schemas"]["Error"]["error"]["type"];

/**
 * The headers a request id is read from, first found wins: degrau's own
 * (`Request-Id`, the id its logs carry), then those API Gateway adds.
 */
export const REQUEST_ID_HEADERS = ["request-id", "apigw-requestid", "x-amzn-requestid"] as const;

/** The request id an answer carries ({@link REQUEST_ID_HEADERS}), if any. */
export function requestIdOf(response: Response): string | undefined {
  for (const name of REQUEST_ID_HEADERS) {
    const value = response.headers.get(name);
    if (value) return value;
  }
  return undefined;
}

/**
 * Anything the client throws for a call: an error answer ({@link APIStatusError})
 * or none ({@link APIConnectionError}), as the official SDKs shape theirs.
 */
export class DegrauError extends Error {
  /** The request id of the answer (`undefined`: no answer came). */
  readonly requestId: string | undefined;

  constructor(message: string, options: { requestId?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.requestId = options.requestId;
  }
}

/**
 * No answer: the connection could not be made or broke off (`fetch` threw), after
 * the retries the policy allows; `cause` is what `fetch` threw.
 */
export class APIConnectionError extends DegrauError {}

/** The call's deadline (`deadlineMs`) passed before an answer. */
export class APITimeoutError extends APIConnectionError {}

/**
 * An error answer of the degrau API (also thrown, as is, for an unknown type or an
 * answer that is not degrau's envelope, such as API Gateway's own).
 */
export class APIStatusError extends DegrauError {
  /** The HTTP status. */
  readonly status: number;
  /** `error.type` of the envelope, or `"unknown"` when the answer was not one. */
  readonly type: ErrorType | "unknown";
  /** Seconds the server asked to wait (`Retry-After`), when it said. */
  readonly retryAfter: number | undefined;
  /** The parsed body (or its text when it was not JSON). */
  readonly body: unknown;

  constructor(
    status: number,
    type: ErrorType | "unknown",
    message: string,
    retryAfter?: number,
    body?: unknown,
    requestId?: string,
  ) {
    super(message, { requestId });
    this.status = status;
    this.type = type;
    this.retryAfter = retryAfter;
    this.body = body;
  }
}

/** 400: the request is malformed or breaks a rule; nothing was written. */
export class InvalidRequest extends APIStatusError {}
/** 401: no tenant (no token, or no `X-Tenant-Id` in dev mode). */
export class Unauthenticated extends APIStatusError {}
/** 403: the token (or `X-Scopes` in dev mode) lacks the scope the operator route needs; nothing was read or written. */
export class Forbidden extends APIStatusError {}
/** 404: no such route, or nothing known about the contact (or the fact). */
export class NotFound extends APIStatusError {}
/** 405: the route exists, not with this method. */
export class MethodNotAllowed extends APIStatusError {}
/** 409: a stale `head`, another round landing, or the same `Idempotency-Key` in progress. */
export class Conflict extends APIStatusError {}
/** 412: `If-Match` names a tenant configuration version that is no longer the stored one; read it again and reapply. */
export class PreconditionFailed extends APIStatusError {}
/** 413: the body (or a tool result) is over its limit. */
export class TooLarge extends APIStatusError {}
/** 415: the body is not JSON. */
export class UnsupportedMediaType extends APIStatusError {}
/** 422: the `Idempotency-Key` was used with another body. */
export class IdempotencyMismatch extends APIStatusError {}
/** 428: a change of the tenant configuration without `If-Match`. */
export class PreconditionRequired extends APIStatusError {}
/** 429: slow down (see `retryAfter`). */
export class RateLimited extends APIStatusError {}
/** 500: degrau failed; nothing was written. */
export class InternalError extends APIStatusError {}
/**
 * 500: the tenant's stored configuration does not read (written by hand into the
 * table); every request of the tenant answers this until it is replaced
 * (`putTenantConfig`, after `getTenantConfig` says why).
 */
export class TenantConfigInvalid extends APIStatusError {}
/** 502: the model answered with an error. */
export class ModelError extends APIStatusError {}
/** 502: the model refused to answer. */
export class ModelRefused extends APIStatusError {}
/** 503: a dependency is unavailable (see `retryAfter`). */
export class Unavailable extends APIStatusError {}
/** 504: the model did not answer in time, or the request's time budget ran out. */
export class ModelTimeout extends APIStatusError {}

/**
 * The class of each documented type. Typed as a `Record` over {@link ErrorType} so
 * that a type added to `docs/openapi.json` (and regenerated into `schema.ts`) fails
 * the build until it has its class here.
 */
export const ERROR_CLASSES: Record<ErrorType, typeof APIStatusError> = {
  invalid_request: InvalidRequest,
  unauthenticated: Unauthenticated,
  forbidden: Forbidden,
  not_found: NotFound,
  method_not_allowed: MethodNotAllowed,
  conflict: Conflict,
  precondition_failed: PreconditionFailed,
  too_large: TooLarge,
  unsupported_media_type: UnsupportedMediaType,
  idempotency_mismatch: IdempotencyMismatch,
  precondition_required: PreconditionRequired,
  rate_limited: RateLimited,
  internal_error: InternalError,
  tenant_config_invalid: TenantConfigInvalid,
  model_error: ModelError,
  model_refused: ModelRefused,
  unavailable: Unavailable,
  model_timeout: ModelTimeout,
};

/**
 * `Retry-After` in seconds from now: delta-seconds, or an HTTP date measured
 * against `now` (milliseconds since the epoch). `undefined` when absent or unreadable.
 */
export function retryAfterSeconds(value: string | null, now: number): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, (date - now) / 1000);
}

function isErrorType(value: unknown): value is ErrorType {
  return typeof value === "string" && Object.hasOwn(ERROR_CLASSES, value);
}

/**
 * The exception for an error envelope `body` (or anything else, read as `text`)
 * answered with `status`: the class of its `error.type`. A streamed round's `error`
 * event is thrown through it too, as the JSON route's answer would be.
 */
export function errorFromBody(
  status: number,
  body: unknown,
  text: string,
  retryAfter?: number,
  requestId?: string,
): APIStatusError {
  let message = text;
  let type: ErrorType | "unknown" = "unknown";
  const envelope = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof envelope === "object" && envelope !== null) {
    const { type: kind, message: said } = envelope as { type?: unknown; message?: unknown };
    if (typeof said === "string") message = said;
    if (isErrorType(kind)) type = kind;
  }
  const ErrorClass = type === "unknown" ? APIStatusError : ERROR_CLASSES[type];
  return new ErrorClass(status, type, message || `HTTP ${status}`, retryAfter, body, requestId);
}

/**
 * The exception for an error answer (any status of 400 or more), given its parsed
 * body (JSON, or the text when it was not JSON).
 */
export function errorFromResponse(response: Response, body: unknown, now: number): APIStatusError {
  const text = typeof body === "string" && body !== "" ? body : response.statusText;
  return errorFromBody(
    response.status,
    body,
    text,
    retryAfterSeconds(response.headers.get("retry-after"), now),
    requestIdOf(response),
  );
}
