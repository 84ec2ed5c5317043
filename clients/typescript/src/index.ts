/**
 * degrau's TypeScript client: {@link DegrauClient}, one method per route
 * (`streamMessage`: a round's answer as it is written, typed events); the
 * error classes, one per error type; the round's input types; the generated API types.
 */

export {
  DegrauClient,
  type AskResponse,
  type ContactPage,
  type ContactSummary,
  type Context,
  type DegrauClientOptions,
  type Erased,
  type FactDeleted,
  type MemoryView,
  type OperatorFact,
  type PostOptions,
  type RecordedRound,
  type SessionClosed,
  type SessionRecord,
  type SessionRecords,
  type SessionSelector,
  type StreamOptions,
  type TenantConfig,
  type TenantConfigView,
  type TranscriptMessage,
  type TranscriptPage,
  type UsageDay,
  type UsageReport,
} from "./client.js";
export {
  APIConnectionError,
  APIStatusError,
  APITimeoutError,
  Conflict,
  DegrauError,
  ERROR_CLASSES,
  Forbidden,
  IdempotencyMismatch,
  InternalError,
  InvalidRequest,
  MethodNotAllowed,
  ModelError,
  ModelRefused,
  ModelTimeout,
  NotFound,
  PreconditionFailed,
  PreconditionRequired,
  RateLimited,
  TenantConfigInvalid,
  TooLarge,
  Unauthenticated,
  Unavailable,
  UnsupportedMediaType,
  REQUEST_ID_HEADERS,
  type ErrorType,
} from "./errors.js";
export { ERROR_TYPES, RETRY_POLICY } from "./retry-policy.js";
export { SignatureError, SIGNATURE_HEADER, verifySignature, type VerifyOptions } from "./signature.js";
export {
  SseDecoder,
  StreamInterrupted,
  type Done,
  type Restart,
  type ServerSentEvent,
  type StreamEvent,
  type TextDelta,
  type ToolFinished,
  type ToolStarted,
} from "./stream.js";
export type { RetryOptions } from "./retry.js";
export type { BlockInput, MessageInput, UsageInput } from "./rounds.js";
export type { components, operations, paths } from "./schema.js";
