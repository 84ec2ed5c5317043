/** examples/bot.ts runs: two incoming lines, two replies, two rounds stored. */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { before, it } from "node:test";

import { API, PACKAGE, STANDIN, client, freshTenant, requireStack } from "./stack.js";

before(requireStack);

/** Runs the compiled bot with `input` on stdin; its stdout, or a rejection naming its stderr. */
function runBot(input: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const bot = spawn(process.execPath, ["dist/examples/bot.js"], {
      cwd: PACKAGE,
      env: { ...process.env, ...env },
      timeout: 120_000,
    });
    let stdout = "";
    let stderr = "";
    bot.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    bot.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    bot.on("error", reject);
    bot.on("close", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`bot exited ${code}: ${stderr}`))));
    bot.stdin.end(input);
  });
}

it("the bot answers each line and stores each as a round", async () => {
  const tenant = freshTenant();
  const stdout = await runBot("Hi, I am Ana\nAny free slot on 2026-12-04?\n", {
    DEGRAU_API_URL: API,
    DEGRAU_TENANT: tenant,
    DEGRAU_CONTACT: "ana",
    ANTHROPIC_BASE_URL: STANDIN,
  });
  const replies = stdout.split("\n").filter((line) => line.startsWith("bot> "));
  assert.equal(replies.length, 2, stdout);
  assert.ok(replies.every((line) => line.length > "bot> ".length), stdout);
  const messages = await client(tenant).transcriptMessages("ana");
  // The second message asked for slots: the bot ran its tool inside the round.
  assert.deepEqual(
    messages.map((m) => m.role),
    ["user", "assistant", "user", "assistant", "user", "assistant"],
  );
  assert.ok(JSON.stringify(messages[3]).includes('"tool_use"'), "the tool call was stored");
});
