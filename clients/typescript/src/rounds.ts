/**
 * What `commitRound` sends, from what the Messages API (and the official
 * `@anthropic-ai/sdk`) returns: `message.usage` and `message.content` as they are.
 *
 * The server's `RoundBody` refuses fields it does not know, and the API returns
 * more than degrau stores (`citations: null` on a text block, `service_tier` and
 * `server_tool_use` in the usage). These functions keep what degrau documents, so
 * a caller can pass the SDK's objects untouched.
 */

import type { components } from "./schema.js";

/** A model call's usage as the Messages API reports it (the SDK's `Usage` fits). */
export interface UsageInput {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  /** Cache writes by lifetime, when the API split them. */
  cache_creation?: {
    ephemeral_5m_input_tokens?: number | null;
    ephemeral_1h_input_tokens?: number | null;
  } | null;
}

/** The usage `commitRound` sends. */
export type RoundUsage = components["schemas"]["RoundBody"]["usage"] & {
  cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
};

/**
 * The usage to send: the four counts (`null` cache counts left out, as the API
 * means 0), and `cache_creation`'s 5m/1h split when `withCacheCreation` and the
 * usage has one. Every other field (`service_tier`, `server_tool_use`, …) is dropped.
 */
export function usageFrom(usage: UsageInput, withCacheCreation: boolean): RoundUsage {
  const out: RoundUsage = { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens };
  if (usage.cache_read_input_tokens != null) out.cache_read_input_tokens = usage.cache_read_input_tokens;
  if (usage.cache_creation_input_tokens != null) {
    out.cache_creation_input_tokens = usage.cache_creation_input_tokens;
  }
  if (withCacheCreation && usage.cache_creation != null) {
    out.cache_creation = {
      ephemeral_5m_input_tokens: usage.cache_creation.ephemeral_5m_input_tokens ?? 0,
      ephemeral_1h_input_tokens: usage.cache_creation.ephemeral_1h_input_tokens ?? 0,
    };
  }
  return out;
}

/**
 * A content block of any type, with any fields: the SDK's block interfaces fit the
 * first member, a block written inline (an object literal) the second.
 */
export type BlockInput = { readonly type: string } | { readonly type: string; readonly [field: string]: unknown };

/** A message of a round: the SDK's `MessageParam`, or `{role, content: message.content}`. */
export interface MessageInput {
  role: "user" | "assistant";
  content: string | readonly BlockInput[];
}

/**
 * The fields degrau stores of each block type. `cache_control` is left out: the
 * server accepts and drops it (degrau places the breakpoints itself).
 */
const BLOCK_FIELDS = new Map<string, readonly string[]>([
  ["text", ["type", "text"]],
  ["tool_use", ["type", "id", "name", "input"]],
  ["tool_result", ["type", "tool_use_id", "content", "is_error"]],
  ["thinking", ["type", "thinking", "signature"]],
  ["redacted_thinking", ["type", "data"]],
]);

/**
 * A block with only the fields degrau stores for its type. A block of a type
 * degrau does not store (`server_tool_use`, `image`, …) is left whole: the server
 * names it in its 400, which says more than dropping it silently would.
 */
export function storedBlock(block: BlockInput): BlockInput {
  const fields = BLOCK_FIELDS.get(block.type);
  if (fields === undefined) return block;
  const record = block as unknown as Record<string, unknown>;
  return Object.fromEntries(
    fields.filter((name) => record[name] !== undefined).map((name) => [name, record[name]]),
  ) as unknown as BlockInput;
}

/** A round's messages with each block reduced by {@link storedBlock}. */
export function roundMessages(messages: Iterable<MessageInput>): MessageInput[] {
  return Array.from(messages, ({ role, content }) => ({
    role,
    content: typeof content === "string" ? content : content.map(storedBlock),
  }));
}
