#!/usr/bin/env python3
"""A terminal chat against degrau's HTTP API (the local stack, or any deployment).

Type a message and press Enter. Commands: /memory, /history, /erase, /quit.
The answer is printed as the model writes it, through the streaming route
(POST .../messages/stream); against a stack without it (the route answers 404 or
405) the chat says so once and uses the JSON route, as it does with --no-stream.
Uses only the standard library.
"""
import argparse
import json
import re
import sys
import urllib.error
import urllib.request
import uuid

#: A Server-Sent Events line's end: CRLF, LF or CR alone.
LINE_END = re.compile(rb"\r\n|\r|\n")


def request_of(api, method, path, tenant, token, body=None, key=None, accept=None):
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    else:
        headers["x-tenant-id"] = tenant
    if key:
        headers["idempotency-key"] = key
    if accept:
        headers["accept"] = accept
    data = None if body is None else json.dumps(body).encode()
    return urllib.request.Request(api + path, data=data, method=method, headers=headers)


def error_body(error):
    """An HTTPError's body as the error envelope (a text body wrapped in one)."""
    text = error.read()
    try:
        return json.loads(text)
    except ValueError:
        return {"error": {"type": "http", "message": text.decode(errors="replace")}}


def call(api, method, path, tenant, token, body=None, key=None):
    request = request_of(api, method, path, tenant, token, body, key)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, error_body(error)


def sse_events(response):
    """(event, data) of each Server-Sent Event of the response as it arrives:
    ``read1`` hands over what the server has sent so far; a blank line ends an
    event; comment lines (``:``) and fields other than event and data are skipped."""
    pending, event, data, after_cr = b"", "", [], False
    while chunk := response.read1(65536):
        if after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the second half of a CRLF cut between reads
        pending += chunk
        start = 0
        while (end := LINE_END.search(pending, start)) is not None:
            after_cr = end.group() == b"\r" and end.end() == len(pending)
            line = pending[start : end.start()].decode("utf-8", errors="replace")
            start = end.end()
            if not line:
                if data:
                    yield event or "message", "\n".join(data)
                event, data = "", []
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
        pending = pending[start:]


def print_done(body):
    usage = body["usage"]
    print(f"       [session {body['session']}, messages {body['round']['first_seq']}-"
          f"{body['round']['last_seq']}, context {usage['context_tokens']} tokens, "
          f"cache read {usage['cache_read_input_tokens']}, step queued: {body['compaction_queued']}]")


def stream_round(api, path, tenant, token, text, key):
    """Sends ``text`` through the streaming route and prints the answer as it
    arrives. Returns (status, body): (200, done's body) when the round was stored and
    printed, an error status with its envelope, or (404/405, ...) when this stack has
    no streaming route."""
    request = request_of(api, "POST", path + "/stream", tenant, token, {"text": text}, key, "text/event-stream")
    try:
        response = urllib.request.urlopen(request, timeout=120)
    except urllib.error.HTTPError as error:
        return error.code, error_body(error)
    line_open = False  # an "agent> " line is being written
    with response:
        try:
            for event, data in sse_events(response):
                if event not in ("delta", "tool_started", "tool_finished", "restart", "done", "error"):
                    continue  # a newer server's event
                payload = json.loads(data)
                if event == "delta":
                    if not line_open:
                        print("agent> ", end="")
                        line_open = True
                    print(payload["text"], end="", flush=True)
                    continue
                if line_open:
                    print()
                    line_open = False
                if event == "tool_started":
                    print(f"       [{payload['name']} ...]", flush=True)
                elif event == "restart":
                    print(f"       [starting over: {payload.get('reason', '')}; the text above is void]", flush=True)
                elif event == "done":
                    return 200, payload
                elif event == "error":
                    return payload.get("status", 500), payload
        except KeyboardInterrupt:
            if line_open:
                print()
            print(f"       [stopped reading; the round goes on and is stored: idempotency key {key}]")
            return 200, None
        except OSError as error:
            if line_open:
                print()
            return 502, {"error": {"type": "stream_interrupted", "message":
                                   f"{error}; the round is stored whole or not at all (idempotency key {key})"}}
    if line_open:
        print()
    return 502, {"error": {"type": "stream_interrupted", "message":
                           f"the stream ended before its done event (idempotency key {key})"}}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default="http://127.0.0.1:9000")
    parser.add_argument("--tenant", default="demo-barbershop")
    parser.add_argument("--contact", default="demo-contact")
    parser.add_argument("--token", help="a JWT, for a deployed API (jwt auth mode)")
    parser.add_argument("--stream-api", help="the streaming route's base URL, when it has its own API "
                        "(on AWS); default --api")
    parser.add_argument("--no-stream", action="store_true",
                        help="send messages through the JSON route: the answer is printed whole")
    args = parser.parse_args()
    stream = not args.no_stream
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
            key = str(uuid.uuid4())
            if stream:
                status, body = stream_round(args.stream_api or args.api, base + "/messages", args.tenant,
                                            args.token, line, key)
                if status in (404, 405):
                    # An older stack: no streaming route. Nothing was done under the key.
                    print("       [this API has no streaming route: answers come whole from now on]")
                    stream = False
                elif status == 200:
                    if body is not None:
                        print_done(body)
                    continue
            if not stream:
                status, body = call(args.api, "POST", base + "/messages", args.tenant, args.token,
                                    {"text": line}, key=key)
                if status == 200:
                    print(f"agent> {body['reply']['text']}")
                    print_done(body)
                    continue
        if status >= 400:
            print(f"error {status}: {body['error']['type']}: {body['error']['message']}", file=sys.stderr)
        else:
            print(json.dumps(body, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
