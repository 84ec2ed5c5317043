/**
 * Headless Chromium (Debian's `chromium`, or `CHROMIUM`) driven over the DevTools
 * protocol on a pipe (`--remote-debugging-pipe`: fd 3 in, fd 4 out, messages
 * separated by NUL), so no WebSocket client or browser-automation package is
 * needed. A {@link Page} clicks with real mouse events at an element's centre,
 * types with `Input.insertText`, waits for a condition, and takes screenshots;
 * every uncaught exception of the page is kept in `errors`.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";

type Json = Record<string, unknown>;
type Listener = (params: Json, sessionId: string | undefined) => void;

export class Browser {
  readonly #process: ChildProcess;
  readonly #profile: string;
  readonly #input: Writable;
  readonly #pending = new Map<number, { resolve: (value: Json) => void; reject: (error: Error) => void; method: string }>();
  readonly #listeners = new Map<string, Set<Listener>>();
  #nextId = 1;
  #log = "";

  private constructor(process: ChildProcess, profile: string) {
    this.#process = process;
    this.#profile = profile;
    this.#input = process.stdio[3] as Writable;
    let buffer = "";
    (process.stdio[4] as Readable).on("data", (chunk: Buffer) => {
      buffer += chunk.toString("utf8");
      let end: number;
      while ((end = buffer.indexOf("\0")) >= 0) {
        this.#dispatch(JSON.parse(buffer.slice(0, end)) as Json);
        buffer = buffer.slice(end + 1);
      }
    });
    process.stderr?.on("data", (chunk: Buffer) => {
      this.#log = (this.#log + chunk.toString("utf8")).slice(-4_000);
    });
    process.on("exit", (code) => {
      for (const { reject, method } of this.#pending.values()) {
        reject(new Error(`Chromium exited (${code}) during ${method}: ${this.#log}`));
      }
      this.#pending.clear();
    });
  }

  /** Starts headless Chromium with a fresh profile. */
  static async launch(): Promise<Browser> {
    const profile = mkdtempSync(join(tmpdir(), "degrau-inspector-"));
    const child = spawn(
      process.env.CHROMIUM ?? "chromium",
      [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--remote-debugging-pipe",
        "--window-size=1280,1000",
        `--user-data-dir=${profile}`,
        "about:blank",
      ],
      // Its own process group: Chromium's renderers and helpers go with it.
      { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"], detached: true },
    );
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (error) => reject(new Error(`could not start Chromium: ${String(error)}`)));
    });
    const browser = new Browser(child, profile);
    await browser.send("Browser.getVersion");
    return browser;
  }

  #dispatch(message: Json): void {
    if (typeof message.id === "number") {
      const pending = this.#pending.get(message.id);
      this.#pending.delete(message.id);
      if (message.error) pending?.reject(new Error(`${pending.method}: ${JSON.stringify(message.error)}`));
      else pending?.resolve((message.result ?? {}) as Json);
      return;
    }
    for (const listener of this.#listeners.get(String(message.method)) ?? []) {
      listener((message.params ?? {}) as Json, message.sessionId as string | undefined);
    }
  }

  /** One protocol command (of a page when `sessionId` is given). */
  send(method: string, params: Json = {}, sessionId?: string): Promise<Json> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, method });
      this.#input.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
    });
  }

  on(event: string, listener: Listener): void {
    if (!this.#listeners.has(event)) this.#listeners.set(event, new Set());
    this.#listeners.get(event)!.add(listener);
  }

  /** A new tab, its page domain and runtime enabled. */
  async newPage(): Promise<Page> {
    const { targetId } = await this.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await this.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(this, String(sessionId));
    await page.send("Page.enable");
    await page.send("Runtime.enable");
    return page;
  }

  /** Kills Chromium's process group and removes the profile. */
  async close(): Promise<void> {
    if (this.#process.pid !== undefined && this.#process.exitCode === null) {
      const gone = new Promise<void>((resolve) => this.#process.once("close", () => resolve()));
      process.kill(-this.#process.pid, "SIGKILL");
      await gone;
    }
    rmSync(this.#profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  }
}

export class Page {
  readonly #browser: Browser;
  readonly #sessionId: string;
  /** The page's uncaught exceptions and console errors, as text. */
  readonly errors: string[] = [];

  constructor(browser: Browser, sessionId: string) {
    this.#browser = browser;
    this.#sessionId = sessionId;
    browser.on("Runtime.exceptionThrown", (params, session) => {
      if (session !== sessionId) return;
      const details = params.exceptionDetails as Json;
      this.errors.push(String((details.exception as Json | undefined)?.description ?? details.text));
    });
    browser.on("Runtime.consoleAPICalled", (params, session) => {
      if (session !== sessionId || params.type !== "error") return;
      this.errors.push((params.args as Json[]).map((a) => String(a.value ?? a.description)).join(" "));
    });
  }

  send(method: string, params: Json = {}): Promise<Json> {
    return this.#browser.send(method, params, this.#sessionId);
  }

  /** Loads `url` and waits for its load event. */
  async goto(url: string): Promise<void> {
    const loaded = new Promise<void>((resolve) =>
      this.#browser.on("Page.loadEventFired", (_, session) => {
        if (session === this.#sessionId) resolve();
      }),
    );
    const { errorText } = await this.send("Page.navigate", { url });
    if (errorText) throw new Error(`could not load ${url}: ${String(errorText)}`);
    await loaded;
  }

  /** The value of a JavaScript expression in the page (awaited when a promise). */
  async evaluate<T>(expression: string): Promise<T> {
    const answer = await this.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    if (answer.exceptionDetails) {
      const details = answer.exceptionDetails as Json;
      throw new Error(`in the page: ${String((details.exception as Json | undefined)?.description ?? details.text)}`);
    }
    return (answer.result as Json).value as T;
  }

  /** Waits until `expression` is truthy (returning its value), or fails naming `what`. */
  async waitFor<T>(expression: string, what: string, timeoutMs = 30_000): Promise<T> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const value = await this.evaluate<T>(expression);
      if (value) return value;
      if (Date.now() > until) {
        const shown = await this.evaluate<string>(`(document.getElementById("error")?.textContent || "") + " | " + document.body.innerText.slice(0, 1500)`);
        throw new Error(`waited ${timeoutMs / 1000} s for ${what}; the page shows: ${shown}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
  }

  /** Clicks the element `selector` finds with the mouse, at its centre (scrolled into view). */
  async click(selector: string): Promise<void> {
    const centre = await this.waitFor<{ x: number; y: number }>(
      `(() => {
        const element = document.querySelector(${JSON.stringify(selector)});
        if (!element || element.disabled) return null;
        element.scrollIntoView({ block: "center" });
        const box = element.getBoundingClientRect();
        return box.width > 0 && box.height > 0 ? { x: box.x + box.width / 2, y: box.y + box.height / 2 } : null;
      })()`,
      `a visible, enabled ${selector}`,
    );
    for (const type of ["mouseMoved", "mousePressed", "mouseReleased"]) {
      await this.send("Input.dispatchMouseEvent", { type, x: centre.x, y: centre.y, button: "left", clickCount: 1 });
    }
  }

  /** Replaces the text of the input `selector` finds, typed as the keyboard would insert it. */
  async fill(selector: string, text: string): Promise<void> {
    await this.click(selector);
    await this.evaluate(`document.querySelector(${JSON.stringify(selector)}).select()`);
    await this.send("Input.insertText", { text });
  }

  /** Chooses `value` in the `<select>` `selector` finds (as a change by the user). */
  async choose(selector: string, value: string): Promise<void> {
    await this.evaluate(`(() => {
      const select = document.querySelector(${JSON.stringify(selector)});
      select.value = ${JSON.stringify(value)};
      select.dispatchEvent(new Event("change", { bubbles: true }));
    })()`);
  }

  /** A PNG of the whole page (beyond the window) written to `path`. */
  async screenshot(path: string): Promise<void> {
    const metrics = await this.send("Page.getLayoutMetrics");
    const size = metrics.cssContentSize as { width: number; height: number };
    const { data } = await this.send("Page.captureScreenshot", {
      format: "png",
      captureBeyondViewport: true,
      clip: { x: 0, y: 0, width: Math.ceil(size.width), height: Math.ceil(size.height), scale: 1 },
    });
    writeFileSync(path, Buffer.from(String(data), "base64"));
  }
}
