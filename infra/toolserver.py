#!/usr/bin/env python3
"""degrau's example tool server: a webhook receiver for the demo barbershop.

Standard library only. It verifies each call's `Degrau-Signature` (HMAC-SHA256 of
"<t>.<raw body>" under the shared secret, compared in constant time, `t` within five
minutes), answers a repeated `Idempotency-Key` with the first answer (a retried round
may call again), and keeps a small calendar in memory:

  list_free_slots {"day": "YYYY-MM-DD"}                   the day's free slots
  book_slot {"day", "time": "HH:MM", "service", "professional"?}   books one

The tool is the body's `name`, so one URL serves both. `GET /bookings` lists the
bookings (with the contact's pseudonym, never a name or number: degrau does not
send them), `GET /calls` every signed call received (tool, `tool_use_id` and
`Idempotency-Key`, repeats included: how often degrau called), `GET /health`
answers 200.

  python3 infra/toolserver.py --port 4020 --secret-env DEGRAU_TOOLSERVER_SECRET

With `--port 0` it picks a free port; either way its first line on stdout is
`toolserver listening on http://127.0.0.1:PORT`.
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_SECONDS = 300
MAX_BODY_BYTES = 64 * 1024
PROFESSIONALS = ["Ana", "Bruno", "Carla"]


def verify(secret: bytes, header: str, body: bytes, now: float) -> str | None:
    """None when the signature holds, else why not."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        t = int(parts["t"])
    except (KeyError, ValueError):
        return "no timestamp"
    if abs(now - t) > TOLERANCE_SECONDS:
        return "stale timestamp"
    expected = hmac.new(secret, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, parts.get("v1", "")):
        return "bad signature"
    return None


class Calendar:
    """Every professional works 09:00-19:00 in 30-minute slots."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bookings = []  # dicts
        self.answers = {}  # Idempotency-Key -> (status, body)
        self.calls = []  # every signed call: {"name", "tool_use_id", "key"}

    def free_slots(self, day: str) -> list:
        taken = {(b["time"], b["professional"]) for b in self.bookings if b["day"] == day}
        slots = []
        for professional in PROFESSIONALS:
            for half_hour in range(20):
                minutes = 9 * 60 + half_hour * 30
                time_ = f"{minutes // 60:02}:{minutes % 60:02}"
                if (time_, professional) not in taken:
                    slots.append({"time": time_, "professional": professional, "minutes": 30})
        return slots

    def run(self, call: dict) -> tuple:
        tool, args = call.get("name"), call.get("input") or {}
        day = args.get("day")
        if not isinstance(day, str) or len(day) != 10:
            return 422, {"error": "`day` is required, as YYYY-MM-DD"}
        if tool == "list_free_slots":
            return 200, {"day": day, "slots": self.free_slots(day)}
        if tool == "book_slot":
            time_, service = args.get("time"), args.get("service")
            professional = args.get("professional") or PROFESSIONALS[0]
            if not time_ or not service:
                return 422, {"error": "`day`, `time` (HH:MM) and `service` are required"}
            if professional not in PROFESSIONALS:
                return 422, {"error": f"no professional named {professional}"}
            if not any(s["time"] == time_ and s["professional"] == professional
                       for s in self.free_slots(day)):
                return 409, {"error": f"{day} {time_} with {professional} is not free"}
            booking = {
                "confirmation_id": f"TS-{len(self.bookings) + 1:04}",
                "day": day, "time": time_, "service": service, "professional": professional,
                "contact": call.get("contact"), "tool_use_id": call.get("tool_use_id"),
            }
            self.bookings.append(booking)
            return 200, {"status": "confirmed", **{k: booking[k] for k in
                         ("confirmation_id", "day", "time", "service", "professional")}}
        return 404, {"error": f"unknown tool {tool!r}"}


def handler(secret: bytes, calendar: Calendar, tenant: str | None = None):
    class Handler(BaseHTTPRequestHandler):
        server_version = "degrau-toolserver"

        def answer(self, status: int, body: dict) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):
            if self.path == "/bookings":
                with calendar.lock:
                    self.answer(200, {"bookings": list(calendar.bookings)})
            elif self.path == "/calls":
                with calendar.lock:
                    self.answer(200, {"calls": list(calendar.calls)})
            elif self.path == "/health":
                self.answer(200, {"ok": True})
            else:
                self.answer(404, {"error": "not found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                return self.answer(413, {"error": "body too large"})
            body = self.rfile.read(length)
            problem = verify(secret, self.headers.get("Degrau-Signature", ""), body, time.time())
            if problem:
                return self.answer(401, {"error": problem})
            # A receiver serves one tenant: a call signed with its secret but for
            # another tenant is refused (the secret was not meant to be shared).
            try:
                called_for = json.loads(body).get("tenant")
            except (ValueError, AttributeError):
                called_for = None
            if tenant is not None and called_for != tenant:
                return self.answer(403, {"error": "not this receiver's tenant"})
            key = self.headers.get("Idempotency-Key", "")
            with calendar.lock:
                try:
                    call = json.loads(body)
                    calendar.calls.append({"name": call.get("name"),
                                           "tool_use_id": call.get("tool_use_id"), "key": key})
                except (ValueError, AttributeError):
                    calendar.calls.append({"name": None, "tool_use_id": None, "key": key})
                if key and key in calendar.answers:
                    return self.answer(*calendar.answers[key])
                try:
                    status, result = calendar.run(json.loads(body))
                except (ValueError, AttributeError):
                    status, result = 400, {"error": "the body is not a JSON object"}
                if key and status < 500:
                    calendar.answers[key] = (status, result)
            self.answer(status, result)

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            # Method, path and status only: never the body.
            sys.stderr.write("toolserver: %s\n" % (format % args))

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4020)
    parser.add_argument("--secret-env", default="DEGRAU_TOOLSERVER_SECRET",
                        help="the variable holding the signing secret")
    parser.add_argument("--tenant", default=None,
                        help="the tenant this receiver serves: calls for any other are refused")
    args = parser.parse_args()
    secret = os.environ.get(args.secret_env, "")
    if not secret:
        sys.exit(f"toolserver: {args.secret_env} is not set (the webhook's signing secret)")
    server = ThreadingHTTPServer((args.host, args.port), handler(secret.encode(), Calendar(), args.tenant))
    print(f"toolserver listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
