/**
 * The committed src/schema.ts is what `npm run generate` makes from the current
 * docs/openapi.json: when the document changes, this fails until it is regenerated.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { it } from "node:test";

/** clients/typescript, from dist/test/unit/. */
const PACKAGE = fileURLToPath(new URL("../../../", import.meta.url));

it("src/schema.ts is generated from the current docs/openapi.json", () => {
  // The generator's command line, as `npm run generate` runs it, to stdout.
  const generated = execFileSync(
    process.execPath,
    ["node_modules/openapi-typescript/bin/cli.js", "../../docs/openapi.json"],
    { cwd: PACKAGE, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
  const committed = readFileSync(`${PACKAGE}src/schema.ts`, "utf8");
  assert.ok(
    generated === committed,
    "src/schema.ts differs from what openapi-typescript makes of docs/openapi.json: run `npm run generate` in clients/typescript and commit it",
  );
});
