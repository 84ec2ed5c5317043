/**
 * What `commitRound` takes: the round's messages and the last model call's usage
 * as the Messages API (and the official `@anthropic-ai/sdk`) returns them. The
 * client sends them as they are: the server reads past the fields degrau does not
 * store or use (`citations`, `caller`, `service_tier`, `server_tool_use`, `null`
 * fields), checks `cache_creation`'s 5m/1h split against `cache_creation_input_tokens`,
 * and names whatever it refuses in its 400. One place does that job, not two.
 */

import type { components } from "./schema.js";

type Schemas = components["schemas"];

/** A type's declared fields, without its index signature. */
type DeclaredFields<T> = {
  [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K];
};

/**
 * The last model call's usage: the generated `ApiUsage`, or the same fields without
 * its index signature. The document's `additionalProperties: true` becomes
 * `[key: string]: unknown`, which TypeScript does not grant an interface such as the
 * SDK's `Usage` (interfaces get no implicit index signature); the SDK's
 * `message.usage` fits the second member, an object literal with any further field
 * (`service_tier`, …) the first. Both are an `ApiUsage` to the request body.
 */
export type UsageInput = Schemas["ApiUsage"] | DeclaredFields<Schemas["ApiUsage"]>;

/**
 * A content block of any type, with any fields: the SDK's block interfaces fit the
 * first member, a block written inline (an object literal) the second.
 *
 * Wider than the generated `RoundContentBlock` on purpose, so that the SDK's
 * `message.content` passes without a cast: its `ContentBlock` union also holds types
 * degrau does not store (`server_tool_use`, `web_search_tool_result`, …), its
 * `tool_use` has `input: unknown` where the generated type says an object, and its
 * request blocks allow `cache_control: null`. The server checks each block and
 * names a bad one in its 400 (`invalid_request`).
 */
export type BlockInput = { readonly type: string } | { readonly type: string; readonly [field: string]: unknown };

/**
 * A message of a round: the SDK's `UserMessageParam` or `AssistantMessageParam`
 * (its `MessageParam` also has a `system` role, which a round has not), or
 * `{role: "assistant", content: message.content}`.
 */
export interface MessageInput {
  role: "user" | "assistant";
  content: string | readonly BlockInput[];
}
