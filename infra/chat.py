#!/usr/bin/env python3
"""A terminal chat against degrau's HTTP API (the local stack, or any deployment).

Type a message and press Enter. Commands: /memory, /history, /erase, /quit.
Uses only the standard library.
"""
import argparse
import json
import sys
import urllib.error
import urllib.request
import uuid


def call(api, method, path, tenant, token, body=None, key=None):
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    else:
        headers["x-tenant-id"] = tenant
    if key:
        headers["idempotency-key"] = key
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(api + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, {"error": {"type": "http", "message": text.decode(errors="replace")}}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default="http://127.0.0.1:9000")
    parser.add_argument("--tenant", default="demo-barbershop")
    parser.add_argument("--contact", default="demo-contact")
    parser.add_argument("--token", help="a JWT, for a deployed API (jwt auth mode)")
    args = parser.parse_args()
    base = f"/v1/contacts/{args.contact}"
    print(f"degrau chat: tenant {args.tenant}, contact {args.contact}, API {args.api}")
    print("Commands: /memory /history /erase /quit")
    while True:
        try:
            line = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return
        if line == "/memory":
            status, body = call(args.api, "GET", base + "/memory", args.tenant, args.token)
        elif line == "/history":
            status, body = call(args.api, "GET", base + "/messages?session=all&limit=50", args.tenant, args.token)
        elif line == "/erase":
            status, body = call(args.api, "DELETE", base, args.tenant, args.token)
        else:
            status, body = call(args.api, "POST", base + "/messages", args.tenant, args.token,
                                {"text": line}, key=str(uuid.uuid4()))
            if status == 200:
                usage = body["usage"]
                print(f"agent> {body['reply']['text']}")
                print(f"       [session {body['session']}, messages {body['round']['first_seq']}-"
                      f"{body['round']['last_seq']}, context {usage['context_tokens']} tokens, "
                      f"cache read {usage['cache_read_input_tokens']}, step queued: {body['compaction_queued']}]")
                continue
        if status >= 400:
            print(f"error {status}: {body['error']['type']}: {body['error']['message']}", file=sys.stderr)
        else:
            print(json.dumps(body, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
