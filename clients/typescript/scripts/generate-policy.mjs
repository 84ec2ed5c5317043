// Generates src/retry-policy.ts from docs/openapi.json's `x-degrau-retry`, the one
// retry policy of degrau's clients (the Python client's _schema.py is generated
// from the same object), and the error types of the envelope. No dependencies.
// `npm run generate` runs it after openapi-typescript; test/unit/policy.test.ts
// fails when the committed file is not what this script makes of the document.
//
//   node scripts/generate-policy.mjs            writes src/retry-policy.ts
//   node scripts/generate-policy.mjs --stdout   prints it

import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = (path) => fileURLToPath(new URL(path, import.meta.url));

export function generate(document) {
  const { description: _, ...policy } = document["x-degrau-retry"];
  const types = document.components.schemas.Error.properties.error.properties.type.enum;
  return `/**
 * The clients' one retry policy (\`x-degrau-retry\`) and the envelope's error types,
 * generated from docs/openapi.json by scripts/generate-policy.mjs. Do not edit:
 * change the document and run \`npm run generate\` (test/unit/policy.test.ts fails
 * while this file is stale).
 */

/** Every error type of the envelope (\`components.schemas.Error\`). */
export const ERROR_TYPES = ${JSON.stringify(types, null, 2).replace(/\n/g, "\n")} as const;

/** \`x-degrau-retry\`: how the clients try a call again (see its description in the document). */
export const RETRY_POLICY = ${JSON.stringify(policy, null, 2)} as const;
`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = generate(JSON.parse(readFileSync(here("../../../docs/openapi.json"), "utf8")));
  if (process.argv.includes("--stdout")) process.stdout.write(text);
  else writeFileSync(here("../src/retry-policy.ts"), text);
}
