#!/usr/bin/env bash
# Smoke test of the README's first command, detached: start the local stack, send
# one message through the local API Gateway paths, read the memory, book a slot as
# the demo tenant through its webhook tools and the example tool server, stop.
set -euo pipefail
cd "$(dirname "$0")/.."
trap 'bash infra/stack.sh stop' EXIT
bash infra/stack.sh start
api="$(cat .local/api.url)"
python3 - "$api" "$(cat .local/toolserver.url)" <<'PY'
import json, sys, urllib.request
api, toolserver = sys.argv[1], sys.argv[2]
def call(method, path, body=None, tenant="smoke"):
    request = urllib.request.Request(api + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-tenant-id": tenant})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read())
status, body = call("POST", "/v1/contacts/smoke-contact/messages", {"text": "Any free slot on 2026-12-04?"})
assert status == 200 and body["reply"]["text"].startswith("[offline stand-in]"), body
assert body["round"]["last_seq"] == 4, body  # a tool round: user, tool_use, tool_result, reply
status, memory = call("GET", "/v1/contacts/smoke-contact/memory")
assert memory["session"]["last_seq"] == 4, memory
print("smoke: the local stack answered through cargo lambda watch:", body["reply"]["text"])
status, body = call("POST", "/v1/contacts/smoke-contact/messages",
                    {"text": "please book 10:30 on 2026-12-04"}, tenant="demo-barbershop")
assert status == 200 and body["round"]["last_seq"] == 4, body
with urllib.request.urlopen(toolserver + "/bookings", timeout=10) as response:
    bookings = json.loads(response.read())["bookings"]
assert [(b["day"], b["time"]) for b in bookings] == [("2026-12-04", "10:30")], bookings
print("smoke: the demo tenant booked through its webhook:", body["reply"]["text"])
PY
# The getting-started page's curl block, as a reader would paste it (its `./dev.sh
# start` and `stop` are this script's own): every request answers 2xx with JSON.
python3 - "$api" <<'PY'
import json, re, shlex, subprocess, sys
api = sys.argv[1]
text = open("docs/getting-started.md", encoding="utf-8").read()
blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
block = next(b for b in blocks if "./dev.sh start" in b)
commands = [c for c in block.replace("\\\n", " ").splitlines() if c.startswith("curl ")]
assert len(commands) >= 2, commands
for command in commands:
    args = shlex.split(command.replace("http://127.0.0.1:9000", api))
    out = subprocess.run(args + ["-f", "-w", "\n%{http_code}"], capture_output=True, text=True, timeout=60)
    body, _, code = out.stdout.rpartition("\n")
    assert out.returncode == 0 and code.startswith("2"), (command, out.returncode, code, body, out.stderr)
    json.loads(body)
print(f"smoke: the getting-started page's {len(commands)} requests answered")
PY
