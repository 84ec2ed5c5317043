"""The terminal chat (``infra/chat.py``), offline against a mock API: it prints the
answer as the streaming route sends it, says so and uses the JSON route when the
stack has no streaming route (404), and uses only the JSON route with
``--no-stream``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import ROOT

ANSWER: dict[str, Any] = {
    "session": 1,
    "reply": {
        "text": "Olá! Às 10h30?",
        "content": [{"type": "text", "text": "Olá! Às 10h30?"}],
        "stop_reason": "end_turn",
    },
    "round": {"first_seq": 1, "last_seq": 4},
    "usage": {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 7,
        "context_tokens": 17,
    },
    "compaction_queued": False,
}


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\r\ndata: {json.dumps(data, ensure_ascii=False)}\r\n\r\n".encode()


STREAM = [
    b": keep-alive\n\n",
    sse("delta", {"text": "Vou ver", "call": 0}),
    sse("tool_started", {"id": "toolu_1", "name": "list_free_slots"}),
    sse("tool_finished", {"id": "toolu_1", "name": "list_free_slots", "is_error": False}),
    sse("delta", {"text": "Olá! ", "call": 1})[:20],  # a data line cut between writes
    sse("delta", {"text": "Olá! ", "call": 1})[20:],
    sse("delta", {"text": "Às 10h30?", "call": 1}),
    sse("done", ANSWER),
]


@dataclass
class MockApi:
    """Answers the streaming route with ``stream`` (or 404 without one) and the
    JSON route with ``ANSWER``; keeps each request's path and key."""

    stream: list[bytes] | None
    seen: list[tuple[str, str | None]] = field(default_factory=list)


@pytest.fixture
def api() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(stream: list[bytes] | None) -> tuple[str, MockApi]:
        mock = MockApi(stream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                mock.seen.append((self.path, self.headers.get("idempotency-key")))
                if self.path.endswith("/stream") and mock.stream is not None:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for piece in mock.stream:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                if self.path.endswith("/stream"):
                    body, status = b'{"error": {"type": "not_found", "message": "no such route"}}', 404
                else:
                    body, status = json.dumps(ANSWER).encode(), 200
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", mock

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run_chat(url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """The chat against ``url``: one message, "hello", then the end of input."""
    return subprocess.run(
        [sys.executable, str(ROOT / "infra" / "chat.py"), "--api", url, "--contact", "ana", *flags],
        input="hello\n",
        capture_output=True,
        encoding="utf-8",
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        timeout=60,
        check=True,
    )


def chat(url: str, *flags: str, stderr: str = "") -> str:
    """What the chat printed, once its errors were ``stderr``."""
    done = run_chat(url, *flags)
    assert done.stderr == stderr
    return done.stdout


STATS = "       [session 1, messages 1-4, context 17 tokens, cache read 7, step queued: False]"


def test_the_chat_prints_the_answer_as_the_stream_sends_it(api: Any) -> None:
    url, mock = api(STREAM)
    lines = chat(url).splitlines()
    assert lines[2:] == [
        "you> agent> Vou ver",
        "       [list_free_slots ...]",
        "agent> Olá! Às 10h30?",
        STATS,
        "you> ",
    ]
    ((path, key),) = mock.seen
    assert path == "/v1/contacts/ana/messages/stream" and key


def test_without_a_streaming_route_the_chat_says_so_and_answers_whole(api: Any) -> None:
    url, mock = api(None)
    lines = chat(url).splitlines()
    assert lines[2:] == [
        "you>        [this API has no streaming route: answers come whole from now on]",
        "agent> Olá! Às 10h30?",
        STATS,
        "you> ",
    ]
    (stream_path, stream_key), (json_path, json_key) = mock.seen
    assert (stream_path, json_path) == ("/v1/contacts/ana/messages/stream", "/v1/contacts/ana/messages")
    assert stream_key == json_key is not None


def test_no_stream_uses_the_json_route(api: Any) -> None:
    url, mock = api(STREAM)
    assert chat(url, "--no-stream").splitlines()[2:] == ["you> agent> Olá! Às 10h30?", STATS, "you> "]
    assert [path for path, _ in mock.seen] == ["/v1/contacts/ana/messages"]


def test_an_error_event_ends_the_answer_with_the_error(api: Any) -> None:
    failure = {"status": 503, "error": {"type": "unavailable", "message": "the model is overloaded"}}
    url, _ = api([sse("delta", {"text": "Vou", "call": 0}), sse("error", failure)])
    out = chat(url, stderr="error 503: unavailable: the model is overloaded\n")
    assert out.splitlines()[2:] == ["you> agent> Vou", "you> "]


def test_a_stream_cut_before_done_says_the_key_to_replay_it_with(api: Any) -> None:
    url, mock = api([sse("delta", {"text": "Vou", "call": 0})])
    done = run_chat(url)
    ((_, key),) = mock.seen
    assert done.stderr == (
        f"error 502: stream_interrupted: the stream ended before its done event (idempotency key {key})\n"
    )
