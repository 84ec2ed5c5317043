/**
 * The client runs in a browser, not only in Node: headless Chromium (Debian's
 * `chromium`, or `CHROMIUM`) loads a page that imports the compiled library as
 * ES modules (`openapi-fetch` through an import map, nothing bundled) and holds a
 * conversation with the local stack through it. The page is served by this test
 * from the same origin as a pass-through to degrau's API (as a web app's own
 * backend or API Gateway's custom domain would be), so no CORS is involved; the
 * page reports what it got by POSTing it back.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, it } from "node:test";

import { API, PACKAGE, freshTenant, requireStack } from "./stack.js";

before(requireStack);

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8">
<script type="importmap">{"imports": {"openapi-fetch": "/node_modules/openapi-fetch/dist/index.mjs"}}</script>
</head><body><script type="module">
import { DegrauClient, NotFound } from "/dist/src/index.js";
const tenant = new URLSearchParams(location.search).get("tenant");
const report = (result) => fetch("/result", { method: "POST", body: JSON.stringify(result) });
try {
  const degrau = new DegrauClient({ baseUrl: location.origin, tenant });
  const sent = await degrau.sendMessage("web-ana", "Hello from a browser");
  const context = await degrau.context("web-ana");
  let missing = null;
  try { await degrau.memory("nobody-here"); } catch (error) { missing = error instanceof NotFound ? "NotFound" : String(error); }
  await report({ reply: sent.reply.text, session: sent.session, window: context.messages.length, missing,
                 agent: navigator.userAgent });
} catch (error) {
  await report({ error: String(error && error.stack || error) });
}
</script></body></html>`;

const TYPES: Record<string, string> = { ".js": "text/javascript", ".mjs": "text/javascript", ".html": "text/html" };

/** Serves the page, the package's files, `/result`, and passes `/v1/` to the API. */
function serve(onResult: (body: string) => void) {
  return createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    if (url.pathname === "/result") {
      onResult(body.toString("utf8"));
      response.writeHead(204).end();
    } else if (url.pathname === "/") {
      response.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    } else if (url.pathname.startsWith("/v1/")) {
      const headers: Record<string, string> = {};
      for (const name of ["content-type", "x-tenant-id", "idempotency-key", "accept"]) {
        const value = request.headers[name];
        if (typeof value === "string") headers[name] = value;
      }
      const answer = await fetch(`${API}${url.pathname}${url.search}`, {
        method: request.method,
        headers,
        body: body.length > 0 ? body : undefined,
      });
      response
        .writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" })
        .end(Buffer.from(await answer.arrayBuffer()));
    } else if (/^\/(dist\/src|node_modules\/openapi-fetch\/dist)\/[\w./-]+$/.test(url.pathname) && !url.pathname.includes("..")) {
      try {
        const file = readFileSync(join(PACKAGE, url.pathname));
        const type = TYPES[url.pathname.slice(url.pathname.lastIndexOf("."))] ?? "application/octet-stream";
        response.writeHead(200, { "content-type": type }).end(file);
      } catch {
        response.writeHead(404).end();
      }
    } else {
      response.writeHead(404).end();
    }
  });
}

it("in headless Chromium the compiled client holds a conversation and raises typed errors", async () => {
  let settle: (body: string) => void = () => {};
  const result = new Promise<string>((resolve) => {
    settle = resolve;
  });
  const server = serve((body) => settle(body));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const profile = mkdtempSync(join(tmpdir(), "degrau-chromium-"));
  const browser = spawn(
    process.env.CHROMIUM ?? "chromium",
    [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      `--user-data-dir=${profile}`,
      `http://127.0.0.1:${port}/?tenant=${freshTenant()}`,
    ],
    // Its own process group: Chromium's renderers and helpers go with it.
    { stdio: ["ignore", "ignore", "pipe"], detached: true },
  );
  let log = "";
  browser.stderr.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString("utf8")).slice(-4_000);
  });
  const gone = new Promise<void>((resolve) => browser.on("close", () => resolve()));
  const exited = new Promise<string>((resolve) => {
    browser.on("error", (error) => resolve(`could not start Chromium: ${String(error)}`));
    browser.on("exit", (code) => resolve(`Chromium exited (${code}) before the page reported: ${log}`));
  });
  const timeout = new Promise<string>((resolve) => {
    setTimeout(() => resolve(`no report from the page within 90 s: ${log}`), 90_000).unref();
  });
  try {
    const outcome = await Promise.race([result, exited.then((why) => Promise.reject(new Error(why))), timeout.then((why) => Promise.reject(new Error(why)))]);
    const report = JSON.parse(outcome) as Record<string, unknown>;
    assert.equal(report.error, undefined, String(report.error));
    assert.ok(typeof report.reply === "string" && report.reply.length > 0, "a reply text");
    assert.equal(report.session, 1);
    assert.equal(report.window, 2, "the context's window holds the round");
    assert.equal(report.missing, "NotFound", "an error answer is its typed class in the browser too");
    assert.match(String(report.agent), /Chrome/);
  } finally {
    if (browser.pid !== undefined && browser.exitCode === null) {
      process.kill(-browser.pid, "SIGKILL");
      await gone;
    }
    server.close();
    rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  }
});
