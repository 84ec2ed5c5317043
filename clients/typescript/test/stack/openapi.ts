/**
 * Every answer the stack tests receive, held to `docs/openapi.json`: `checkedFetch`
 * matches each answer of degrau's API to its operation (method and path template)
 * and status and validates its body against that response's schema with Ajv
 * (draft 2020-12, the dialect of OpenAPI 3.1), errors included. An answer the
 * document does not describe throws in the test that received it, as the Rust
 * end-to-end tests and the Python client's stack tests do.
 */

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";

type Json = Record<string, unknown>;

// The repository's docs/openapi.json, from dist/test/stack/.
const DOCUMENT = JSON.parse(readFileSync(fileURLToPath(new URL("../../../../../docs/openapi.json", import.meta.url)), "utf8")) as {
  paths: Record<string, Record<string, Json>>;
  components: Json;
};

// OpenAPI's own keywords (`example`, `discriminator`) are annotations to Ajv.
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema({ $id: "openapi", components: DOCUMENT.components });
const compiled = new Map<string, ValidateFunction>();

function validator(schema: Json): ValidateFunction {
  // Local references point into the document's components, registered as "openapi".
  const text = JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/');
  let validate = compiled.get(text);
  if (validate === undefined) {
    validate = ajv.compile(JSON.parse(text) as Json);
    compiled.set(text, validate);
  }
  return validate;
}

function resolve(value: Json): Json {
  const ref = value.$ref;
  if (typeof ref !== "string") return value;
  let node: unknown = DOCUMENT;
  for (const part of ref.replace(/^#\//, "").split("/")) node = (node as Json)[part];
  return node as Json;
}

function fits(template: string, path: string): boolean {
  const t = template.split("/");
  const p = path.split("/");
  return t.length === p.length && t.every((part, i) => (part.startsWith("{") && part.endsWith("}") ? p[i] !== "" : part === p[i]));
}

/** Throws unless the document describes this answer of `method path`. */
export function check(method: string, path: string, status: number, body: string): void {
  const template = Object.keys(DOCUMENT.paths).find((t) => fits(t, path));
  const operation = template === undefined ? undefined : (DOCUMENT.paths[template]?.[method.toLowerCase()] as Json | undefined);
  let name: string;
  let schema: Json | undefined;
  if (operation === undefined) {
    if (status < 400 || status >= 500) throw new Error(`${method} ${path} is not in docs/openapi.json, yet answered ${status}`);
    name = `${method} ${path} (no such operation)`;
    schema = { $ref: "#/components/schemas/Error" };
  } else {
    name = String(operation.operationId);
    const response = (operation.responses as Record<string, Json>)[String(status)];
    if (response === undefined) throw new Error(`docs/openapi.json: ${name} answered ${status}, a status it does not list: ${body}`);
    const content = resolve(response).content as Record<string, { schema?: Json }> | undefined;
    schema = content?.["application/json"]?.schema;
  }
  if (schema === undefined) {
    if (body !== "") throw new Error(`docs/openapi.json: ${name} answered ${status} with a body the document does not promise`);
    return;
  }
  const validate = validator(schema);
  if (!validate(JSON.parse(body))) {
    throw new Error(`docs/openapi.json: ${name}'s ${status} answer does not fit its schema: ${ajv.errorsText(validate.errors)}; body: ${body}`);
  }
}

/** `fetch`, with every answer of degrau's API checked by {@link check}. */
export async function checkedFetch(request: Request): Promise<Response> {
  const response = await globalThis.fetch(request);
  check(request.method, new URL(request.url).pathname, response.status, await response.clone().text());
  return response;
}
