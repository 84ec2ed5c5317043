#!/usr/bin/env bash
# The TypeScript client as a user installs it: `npm pack` (which builds it), the
# tarball installed into a fresh project, and the package imported from there by
# name under Node (ESM), its exports and error classes checked. Run by
# `./dev.sh test`; needs only the npm registry (for openapi-fetch).
set -euo pipefail
cd "$(dirname "$0")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tarball="$(npm pack --silent --pack-destination "$tmp" | tail -1)"
echo "check-install: packed $tarball"
cd "$tmp"
npm init -y >/dev/null
npm install --no-audit --no-fund --loglevel=error "./$tarball"
node --input-type=module -e '
import { DegrauClient, DegrauError, NotFound, Conflict, StreamInterrupted } from "degrau-client";
const client = new DegrauClient({ baseUrl: "http://127.0.0.1:9", tenant: "t", retries: 0 });
for (const method of ["sendMessage", "streamMessage", "transcript", "transcriptMessages", "memory", "context", "commitRound", "erase", "openapi"]) {
  if (typeof client[method] !== "function") throw new Error(`no ${method}`);
}
if (typeof StreamInterrupted !== "function") throw new Error("no StreamInterrupted");
if (!(Object.create(NotFound.prototype) instanceof DegrauError) || !(Object.create(Conflict.prototype) instanceof DegrauError)) {
  throw new Error("error classes do not extend DegrauError");
}
console.log("check-install: degrau-client imports by name from an installed tarball");
'
