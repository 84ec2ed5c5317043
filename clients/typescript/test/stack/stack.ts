/**
 * The running local stack the `test:stack` group talks to. `DEGRAU_API_URL` (default
 * the contents of the repository's `.local/api.url`) and `DEGRAU_STANDIN_URL`
 * (default http://127.0.0.1:4110). A stack that cannot be reached fails the group
 * with a message saying which address was tried; only when no stack is configured
 * at all ({@link STACK_MISSING}) may a test skip instead, saying so.
 */

import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { DegrauClient } from "../../src/index.js";
import { checkedFetch } from "./openapi.js";

/** clients/typescript, from dist/test/stack/. */
export const PACKAGE = fileURLToPath(new URL("../../../", import.meta.url));

/** The API's base URL, or why none is configured. */
function apiUrl(): { url: string; missing?: undefined } | { url: ""; missing: string } {
  if (process.env.DEGRAU_API_URL) return { url: process.env.DEGRAU_API_URL };
  const file = resolve(PACKAGE, "../../.local/api.url");
  try {
    return { url: readFileSync(file, "utf8").trim() };
  } catch {
    return { url: "", missing: `no stack configured: no DEGRAU_API_URL and no ${file} (start the local stack, or set DEGRAU_API_URL)` };
  }
}

const configured = apiUrl();
export const API = configured.url;
/** Why no stack is configured (no `DEGRAU_API_URL`, no `.local/api.url`); undefined when one is. */
export const STACK_MISSING = configured.missing;
export const STANDIN = process.env.DEGRAU_STANDIN_URL ?? "http://127.0.0.1:4110";

/**
 * Waits up to 90 s for the API and the stand-in to answer (a restart of the stack
 * takes about a minute), then fails loudly, naming the address and its last answer.
 */
export async function requireStack(): Promise<void> {
  if (STACK_MISSING !== undefined) throw new Error(STACK_MISSING);
  const until = Date.now() + 90_000;
  for (const [what, url] of [
    ["degrau's API (DEGRAU_API_URL)", `${API}/v1/openapi.json`],
    ["the model stand-in (DEGRAU_STANDIN_URL)", `${STANDIN}/stand-in/health`],
  ] as const) {
    for (;;) {
      let status: number | string;
      try {
        status = (await fetch(url, { signal: AbortSignal.timeout(10_000) })).status;
      } catch (error) {
        status = String(error);
      }
      if (status === 200) break;
      if (Date.now() > until) throw new Error(`the local stack is not reachable: ${what} at ${url} answered ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
  }
}

/** A tenant of its own per test: other helpers share the stack. */
export function freshTenant(): string {
  return `ts-${crypto.randomUUID().slice(0, 12)}`;
}

/** A client of `tenant` (a fresh one by default), every answer checked against the document. */
export function client(tenant: string = freshTenant()): DegrauClient {
  return new DegrauClient({ baseUrl: API, tenant, deadlineMs: 120_000, fetch: checkedFetch });
}

/** Every operator scope (`X-Scopes` under `AUTH_MODE=dev`). */
export const ALL_SCOPES = ["memory:read", "memory:write", "tenant:admin"] as const;

/** An operator's client of `tenant` with these scopes (and operator id), every answer checked. */
export function operator(tenant: string, scopes: readonly string[] = ALL_SCOPES, operatorId?: string): DegrauClient {
  return new DegrauClient({ baseUrl: API, tenant, scopes, operator: operatorId, deadlineMs: 120_000, fetch: checkedFetch });
}

/** The stand-in's request log: every model request it received (other tests' too), oldest first. */
export async function standinRequests(): Promise<{ body: { system?: unknown; messages?: unknown } }[]> {
  const answer = await fetch(`${STANDIN}/stand-in/requests`);
  if (!answer.ok) throw new Error(`the stand-in's log answered ${answer.status}`);
  return (await answer.json()) as { body: { system?: unknown; messages?: unknown } }[];
}

/** A client that sends no tenant. */
export function anonymous(): DegrauClient {
  return new DegrauClient({ baseUrl: API, fetch: checkedFetch });
}
