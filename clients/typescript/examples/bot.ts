/**
 * A WhatsApp-style bot that runs its own model loop and keeps its memory in degrau.
 *
 * Each line on stdin is an incoming message of one contact; for each:
 * `context` (degrau's system blocks and window, with its cache breakpoints) → add
 * the message → `messages.create` on the official `@anthropic-ai/sdk` → run the
 * tools the model asked for → … → `commitRound` with the whole round and the last
 * call's `usage`, as the SDK returned them. The reply is printed as `bot> …`.
 *
 * Against the local stack and its offline stand-in:
 *
 *     cd clients/typescript && npm run build
 *     DEGRAU_API_URL=http://127.0.0.1:9000 DEGRAU_TENANT=acme DEGRAU_CONTACT=ana \
 *       node dist/examples/bot.js
 *
 * Environment: `DEGRAU_API_URL` (default http://127.0.0.1:9000), `DEGRAU_TENANT`
 * (`X-Tenant-Id`, dev mode) or `DEGRAU_TOKEN` (a JWT), `DEGRAU_CONTACT` (default
 * `demo-contact`), `ANTHROPIC_BASE_URL` (default the stand-in,
 * http://127.0.0.1:4010), `ANTHROPIC_API_KEY` (default `offline`), `MODEL`.
 */

import { createInterface } from "node:readline";

import Anthropic from "@anthropic-ai/sdk";

import { Conflict, DegrauClient, type Context, type MessageInput } from "../src/index.js";

const MODEL = process.env.MODEL ?? "claude-sonnet-4-5";
/** A round holds at most 18 messages: the user's, 8 tool calls and results, the answer. */
const MAX_TOOL_ROUNDS = 8;
/** How often a turn is rerun on a fresh context when another round landed first. */
const MAX_CONFLICTS = 3;

const TOOLS: Anthropic.Tool[] = [
  {
    name: "list_free_slots",
    description: "Lists the free slots of a day at the barber shop.",
    input_schema: {
      type: "object",
      properties: { day: { type: "string", description: "YYYY-MM-DD" } },
      required: ["day"],
    },
  },
  {
    name: "book_slot",
    description: "Books a slot; answers a confirmation code.",
    input_schema: {
      type: "object",
      properties: {
        day: { type: "string", description: "YYYY-MM-DD" },
        time: { type: "string", description: "HH:MM" },
        service: { type: "string" },
      },
      required: ["day", "time"],
    },
  },
];

/** A small deterministic hash, so the made-up calendar answers the same each run. */
function seedOf(text: string): number {
  let seed = 0;
  for (const char of text) seed = (seed * 31 + char.charCodeAt(0)) >>> 0;
  return seed;
}

/** The bot's own tool: a day's free slots (a real bot asks its calendar). */
function listFreeSlots(day: string): string[] {
  const seed = seedOf(day);
  return Array.from({ length: 8 }, (_, h) => `${String(9 + h).padStart(2, "0")}:${(seed >> h) & 1 ? "30" : "00"}`).filter(
    (_, h) => (seed >> (h + 8)) % 3 !== 0,
  );
}

/** A tool call's result as the text degrau stores. */
function runTool(call: Anthropic.ToolUseBlock): Anthropic.ToolResultBlockParam {
  const input = call.input as { day?: unknown; time?: unknown; service?: unknown };
  const result = (value: unknown): Anthropic.ToolResultBlockParam => ({
    type: "tool_result",
    tool_use_id: call.id,
    content: JSON.stringify(value),
  });
  if (call.name === "list_free_slots" && typeof input.day === "string") return result(listFreeSlots(input.day));
  if (call.name === "book_slot" && typeof input.day === "string" && typeof input.time === "string") {
    const service = typeof input.service === "string" ? input.service : "haircut";
    const code = seedOf(`${input.day} ${input.time} ${service}`).toString(16).slice(0, 4).toUpperCase();
    return result({ confirmation: `BK-${code}`, day: input.day, time: input.time, service });
  }
  return { type: "tool_result", tool_use_id: call.id, content: `cannot run ${call.name}`, is_error: true };
}

/**
 * The request's messages: the window, then the round so far with the context's
 * breakpoint on the last block (with degrau's three, the API's limit of four).
 */
function requestMessages(context: Context, round: Anthropic.MessageParam[]): Anthropic.MessageParam[] {
  const messages: Anthropic.MessageParam[] = [...context.messages, ...round];
  const last = messages[messages.length - 1]!;
  const content = typeof last.content === "string" ? [{ type: "text" as const, text: last.content }] : [...last.content];
  content[content.length - 1] = { ...content[content.length - 1]!, cache_control: context.cache_control } as (typeof content)[number];
  return [...messages.slice(0, -1), { ...last, content } as Anthropic.MessageParam];
}

/** One incoming message through the bot's own loop, committed as one round; the reply. */
async function answer(degrau: DegrauClient, model: Anthropic, contact: string, text: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const context = await degrau.context(contact);
    // Messages of both the SDK's request and degrau's round (user and assistant only).
    const round: (Anthropic.MessageParam & MessageInput)[] = [{ role: "user", content: [{ type: "text", text }] }];
    let response: Anthropic.Message;
    for (let toolRounds = 0; ; toolRounds++) {
      response = await model.messages.create({
        model: MODEL,
        max_tokens: 1024,
        system: context.system,
        messages: requestMessages(context, round),
        tools: TOOLS,
      });
      round.push({ role: "assistant", content: response.content });
      const calls = response.content.filter((block): block is Anthropic.ToolUseBlock => block.type === "tool_use");
      if (response.stop_reason !== "tool_use" || calls.length === 0) break;
      if (toolRounds === MAX_TOOL_ROUNDS) throw new Error(`more than ${MAX_TOOL_ROUNDS} tool rounds`);
      round.push({ role: "user", content: calls.map(runTool) });
    }
    try {
      // The SDK's content and usage go as they are; the server reads past what degrau does not store.
      await degrau.commitRound(contact, context.head, round, response.usage);
    } catch (error) {
      // Another round landed on this contact first: rerun on the fresh context.
      if (error instanceof Conflict && attempt < MAX_CONFLICTS) continue;
      throw error;
    }
    return response.content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("\n");
  }
}

async function main(): Promise<void> {
  const degrau = new DegrauClient({
    baseUrl: process.env.DEGRAU_API_URL ?? "http://127.0.0.1:9000",
    tenant: process.env.DEGRAU_TENANT,
    token: process.env.DEGRAU_TOKEN,
  });
  const model = new Anthropic({
    baseURL: process.env.ANTHROPIC_BASE_URL ?? "http://127.0.0.1:4010",
    apiKey: process.env.ANTHROPIC_API_KEY ?? "offline",
  });
  const contact = process.env.DEGRAU_CONTACT ?? "demo-contact";
  // One message at a time, in order, as a contact's chat delivers them.
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === "") continue;
    console.log(`bot> ${await answer(degrau, model, contact, line)}`);
  }
}

await main();
