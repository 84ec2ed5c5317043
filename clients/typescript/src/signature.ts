/**
 * Verifying degrau's webhook-tool calls, for a tenant's receiver (Node 20+, Deno,
 * Workers, browsers: Web Crypto only).
 *
 * degrau signs every call of a webhook tool (docs/webhook-tools.md) with
 * `Degrau-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`
 * under the tool's signing secret (Stripe's scheme; each attempt signed afresh).
 * {@link verifySignature} checks it over the raw bytes received, in constant time,
 * and refuses a `t` too far from now (a replayed call):
 *
 * ```ts
 * const body = await request.text(); // the raw body, before any JSON.parse
 * try {
 *   await verifySignature(secret, request.headers.get("degrau-signature"), body);
 * } catch (error) {
 *   if (error instanceof SignatureError) return new Response(error.message, { status: 401 });
 *   throw error;
 * }
 * ```
 *
 * While a secret is rotated (a warm `ask` keeps the old one up to five minutes)
 * pass both: any of them verifies. A receiver also refuses a call whose `tenant` is
 * not the one it serves, and answers a repeated `Idempotency-Key` with its first
 * answer.
 */

/** The header degrau signs a call in. */
export const SIGNATURE_HEADER = "Degrau-Signature";

/** The call is not signed by degrau with the secret given, or its signature is too old; the message says which. */
export class SignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SignatureError";
  }
}

/** How {@link verifySignature} checks the timestamp. */
export interface VerifyOptions {
  /** How far `t` may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Now, in seconds since the epoch (default the clock). */
  now?: number;
}

type Bytes = string | Uint8Array;

/** Bytes in an ArrayBuffer of their own (Web Crypto takes no shared buffer). */
const encode = (value: Bytes): Uint8Array<ArrayBuffer> =>
  typeof value === "string" ? new TextEncoder().encode(value) : new Uint8Array(value);

async function hmacHex(secret: Bytes, data: Uint8Array<ArrayBuffer>): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, data));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Equal strings, compared without stopping at the first difference. */
function sameText(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

/**
 * Checks a call's `Degrau-Signature` `header` over its raw `body` (the bytes
 * received, or their text as UTF-8: never a re-encoded JSON) under `secret` (or
 * any of several, while rotating). Resolves to the call's timestamp; rejects with
 * {@link SignatureError} when there is no valid `t` or `v1`, when `t` is more than
 * the tolerance from now, or when no `v1` matches.
 */
export async function verifySignature(
  secret: Bytes | readonly Bytes[],
  header: string | null | undefined,
  body: Bytes,
  options: VerifyOptions = {},
): Promise<number> {
  if (!header) throw new SignatureError(`no ${SIGNATURE_HEADER} header`);
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const at = part.indexOf("=");
    const [name, value] = [part.slice(0, at).trim(), part.slice(at + 1).trim()];
    if (at < 0) continue;
    if (name === "t" && /^\d+$/.test(value)) timestamp = Number(value);
    else if (name === "v1" && value) signatures.push(value);
  }
  if (timestamp === undefined) throw new SignatureError("the signature has no timestamp (t=)");
  if (signatures.length === 0) throw new SignatureError("the signature has no v1=");
  const tolerance = options.toleranceSeconds ?? 300;
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - timestamp) > tolerance) {
    throw new SignatureError(`the timestamp is more than ${tolerance} s from now: a replayed or delayed call`);
  }
  const secrets: readonly Bytes[] = typeof secret === "string" || secret instanceof Uint8Array ? [secret] : secret;
  if (secrets.length === 0) throw new SignatureError("no secret to verify with");
  const raw = encode(body);
  const signed = new Uint8Array(`${timestamp}.`.length + raw.length);
  signed.set(encode(`${timestamp}.`));
  signed.set(raw, `${timestamp}.`.length);
  for (const key of secrets) {
    const expected = await hmacHex(key, signed);
    if (signatures.some((given) => sameText(expected, given))) return timestamp;
  }
  throw new SignatureError("no signature matches the body under the secret");
}
