/** A scripted `fetch`, clock and sleep for the offline tests. */

import { DegrauClient, type DegrauClientOptions } from "../../src/index.js";

/** A request as the fake received it. */
export interface Seen {
  method: string;
  url: URL;
  headers: Headers;
  body: string;
}

/**
 * One scripted answer: a response, an error `fetch` throws, or `"hang"`: no answer
 * until the request's signal aborts it.
 */
export type Answer = { status: number; body?: unknown; headers?: Record<string, string> } | Error | "hang";

/** The JSON error envelope degrau answers. */
export function envelope(type: string, message = `a ${type} error`): { error: { type: string; message: string } } {
  return { error: { type, message } };
}

/**
 * A client on a fake `fetch` that answers `answers` in order (the last one again
 * once they run out), a fake clock starting at `start` that `sleep` advances, and
 * a fixed jitter of 0 (so backoffs are exactly half their step).
 */
export function fakeClient(answers: Answer[], options: Partial<DegrauClientOptions> = {}, start = 0) {
  const seen: Seen[] = [];
  const sleeps: number[] = [];
  let clock = start;
  let next = 0;
  const fetch = async (request: Request): Promise<Response> => {
    seen.push({
      method: request.method,
      url: new URL(request.url),
      headers: request.headers,
      body: await request.text(),
    });
    const answer = answers[Math.min(next++, answers.length - 1)]!;
    if (answer instanceof Error) throw answer;
    if (answer === "hang") {
      // The deadline's timer (AbortSignal.timeout) is unref'd: it does not keep
      // Node's event loop alive, a real request's socket does. This interval stands
      // in for the socket until the abort; without it the loop could empty first and
      // node:test cancel the file's remaining tests.
      const socket = setInterval(() => {}, 1_000);
      return new Promise((_, reject) =>
        request.signal.addEventListener("abort", () => {
          clearInterval(socket);
          reject(request.signal.reason);
        }),
      );
    }
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? {});
    return new Response(text, {
      status: answer.status,
      headers: { "content-type": "application/json", ...answer.headers },
    });
  };
  const client = new DegrauClient({
    baseUrl: "http://degrau.test/",
    tenant: "acme",
    fetch,
    now: () => clock,
    sleep: async (ms: number) => {
      sleeps.push(ms);
      clock += ms;
    },
    random: () => 0,
    ...options,
  });
  return { client, seen, sleeps, clock: () => clock };
}
