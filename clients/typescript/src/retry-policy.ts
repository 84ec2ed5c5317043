/**
 * The clients' one retry policy (`x-degrau-retry`) and the envelope's error types,
 * generated from docs/openapi.json by scripts/generate-policy.mjs. Do not edit:
 * change the document and run `npm run generate` (test/unit/policy.test.ts fails
 * while this file is stale).
 */

/** Every error type of the envelope (`components.schemas.Error`). */
export const ERROR_TYPES = [
  "invalid_request",
  "unauthenticated",
  "forbidden",
  "not_found",
  "method_not_allowed",
  "conflict",
  "precondition_failed",
  "too_large",
  "unsupported_media_type",
  "idempotency_mismatch",
  "precondition_required",
  "rate_limited",
  "internal_error",
  "tenant_config_invalid",
  "model_error",
  "model_refused",
  "unavailable",
  "model_timeout"
] as const;

/** `x-degrau-retry`: how the clients try a call again (see its description in the document). */
export const RETRY_POLICY = {
  "max_retries": 3,
  "deadline_seconds": 60,
  "initial_backoff_seconds": 0.5,
  "max_backoff_seconds": 8,
  "jitter": "equal",
  "connection_errors": true,
  "error_types": {
    "invalid_request": false,
    "unauthenticated": false,
    "forbidden": false,
    "not_found": false,
    "method_not_allowed": false,
    "conflict": false,
    "precondition_failed": false,
    "too_large": false,
    "unsupported_media_type": false,
    "idempotency_mismatch": false,
    "precondition_required": false,
    "rate_limited": true,
    "internal_error": true,
    "tenant_config_invalid": false,
    "model_error": false,
    "model_refused": false,
    "unavailable": true,
    "model_timeout": true
  },
  "statuses_without_envelope": [
    429,
    500,
    502,
    503,
    504
  ]
} as const;
