#!/usr/bin/env bash
# Smoke test of the README's first command, detached: start the local stack, send
# one message through the local API Gateway paths, read the memory, stop.
set -euo pipefail
cd "$(dirname "$0")/.."
trap 'bash infra/stack.sh stop' EXIT
bash infra/stack.sh start
api="$(cat .local/api.url)"
python3 - "$api" <<'PY'
import json, sys, urllib.request
api = sys.argv[1]
def call(method, path, body=None):
    request = urllib.request.Request(api + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-tenant-id": "smoke"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read())
status, body = call("POST", "/v1/contacts/smoke-contact/messages", {"text": "Any free slot on 2026-12-04?"})
assert status == 200 and body["reply"]["text"].startswith("[offline stand-in]"), body
assert body["round"]["last_seq"] == 4, body  # a tool round: user, tool_use, tool_result, reply
status, memory = call("GET", "/v1/contacts/smoke-contact/memory")
assert memory["session"]["last_seq"] == 4, memory
print("smoke: the local stack answered through cargo lambda watch:", body["reply"]["text"])
PY
