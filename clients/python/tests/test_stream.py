"""Streamed replies (``stream_message``), sync and async.

Offline: a mock API that answers the streaming route as the contract says
(``/work/stream-spec.md`` §3: each event ``event:`` + one ``data:`` line + a blank
line), cut at awkward places (a ``data:`` line split between reads, a ``\\r\\n``
split in half, a UTF-8 character split in half), with comments and unknown events;
a JSON error before the stream (raised as today, retried as ``send_message`` is); an
``error`` event mid-stream (raised as its class, never retried); a stream cut before
``done``; a replay holding only ``done``. A real HTTP server shows the events reach
the caller as they are sent, not when the body ends.

On the local stack: a round's deltas joined are its reply's text; a replay with the
same ``Idempotency-Key`` is ``done`` alone with the same body; ``done`` is what the
JSON route answers."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import httpx
import pytest

from conftest import Stack
from degrau_client import (
    ERROR_CLASSES,
    APIStatusError,
    AsyncDegrauClient,
    DegrauClient,
    DegrauError,
    Done,
    IdempotencyMismatch,
    Restart,
    StreamEvent,
    StreamInterrupted,
    TextDelta,
    ToolFinished,
    ToolStarted,
    Unavailable,
)
from degrau_client.streaming import ServerSentEvent, SseDecoder
from openapi_check import check, example
from scripted import FakeTime, error
from test_errors import TYPES

Flavor = Literal["sync", "async"]
FLAVORS: tuple[Flavor, ...] = ("sync", "async")

#: What the JSON route answers for a round (docs/openapi.json's example).
ANSWER: dict[str, Any] = example("sendMessage")


def sse(event: str, data: Any, end: str = "\n") -> bytes:
    """One event as the route sends it."""
    line = json.dumps(data, ensure_ascii=False)
    return f"event: {event}{end}data: {line}{end}{end}".encode()


def round_body(end: str = "\n") -> bytes:
    """A tool round: comments, an unknown event, non-ASCII text, a restart."""
    return b"".join(
        [
            f": keep-alive{end}{end}".encode(),
            sse("delta", {"text": "Vou ver a agenda", "call": 0}, end),
            sse("tool_started", {"id": "toolu_1", "name": "list_free_slots"}, end),
            sse("thinking_summary", {"text": "an event a newer server may send"}, end),
            f":{end}".encode(),
            sse("tool_finished", {"id": "toolu_1", "name": "list_free_slots", "is_error": False}, end),
            sse("restart", {"reason": "a commit race: answered again"}, end),
            sse("delta", {"text": "Olá! Às 10h30 — ", "call": 1}, end),
            sse("delta", {"text": "serve? 👍", "call": 1}, end),
            sse("done", ANSWER, end),
        ]
    )


ROUND_EVENTS: list[StreamEvent] = [
    TextDelta("Vou ver a agenda", 0),
    ToolStarted("toolu_1", "list_free_slots", None),
    ToolFinished("toolu_1", "list_free_slots", False),
    Restart("a commit race: answered again"),
    TextDelta("Olá! Às 10h30 — ", 1),
    TextDelta("serve? 👍", 1),
    Done(ANSWER),
]

#: A body cut into reads: bytes, or an exception the read raises there.
Chunks = list[bytes | Exception]
#: One scripted answer: a stream, a whole (JSON error) response, or an exception
#: the connection raises before any answer.
Step = Chunks | httpx.Response | Exception


@dataclass
class StreamScript:
    """A mock API answering each request with the next step (the last again once
    they run out); it keeps the requests."""

    steps: list[Step]
    requests: list[httpx.Request] = field(default_factory=list)

    def _step(self, request: httpx.Request) -> Chunks | httpx.Response:
        request.read()
        self.requests.append(request)
        step = self.steps[min(len(self.requests), len(self.steps)) - 1]
        if isinstance(step, Exception):
            raise step
        return step

    @staticmethod
    def _whole(step: httpx.Response) -> httpx.Response:
        return httpx.Response(step.status_code, headers=step.headers, content=step.content)

    def transport(self) -> httpx.MockTransport:
        def answer(request: httpx.Request) -> httpx.Response:
            step = self._step(request)
            if isinstance(step, httpx.Response):
                return self._whole(step)

            def body() -> Iterator[bytes]:
                for piece in step:
                    if isinstance(piece, Exception):
                        raise piece
                    yield piece

            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

        return httpx.MockTransport(answer)

    def async_transport(self) -> httpx.MockTransport:
        async def answer(request: httpx.Request) -> httpx.Response:
            await request.aread()
            step = self._step(request)
            if isinstance(step, httpx.Response):
                return self._whole(step)

            async def body() -> AsyncIterator[bytes]:
                for piece in step:
                    if isinstance(piece, Exception):
                        raise piece
                    yield piece

            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

        return httpx.MockTransport(answer)

    def keys(self) -> list[str | None]:
        return [r.headers.get("idempotency-key") for r in self.requests]


@dataclass
class Outcome:
    """What a caller iterating the stream saw: the events, then the error raised
    (None when the iteration ended)."""

    events: list[StreamEvent]
    raised: Exception | None


def stream(
    flavor: Flavor,
    script: StreamScript,
    *,
    time: FakeTime | None = None,
    contact: str = "ana",
    key: str | None = None,
    **settings: Any,
) -> Outcome:
    """``stream_message(contact, "hello")`` on the sync or the async client."""
    time = time or FakeTime()
    events: list[StreamEvent] = []
    options: dict[str, Any] = {"tenant": "acme", "clock": time.clock, **settings}
    if flavor == "sync":
        client = DegrauClient("http://degrau.test", transport=script.transport(), sleep=time.sleep, **options)
        try:
            for event in client.stream_message(contact, "hello", idempotency_key=key):
                events.append(event)
        except Exception as raised:
            return Outcome(events, raised)
        return Outcome(events, None)

    async def main() -> Exception | None:
        async with AsyncDegrauClient(
            "http://degrau.test", transport=script.async_transport(), sleep=time.async_sleep, **options
        ) as client:
            try:
                async for event in client.stream_message(contact, "hello", idempotency_key=key):
                    events.append(event)
            except Exception as raised:
                return raised
        return None

    return Outcome(events, asyncio.run(main()))


def cut(body: bytes, *at: int) -> Chunks:
    """``body`` read in pieces ending at the offsets ``at``."""
    edges = [0, *at, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_round_streams_as_typed_events_and_ends_at_done(flavor: Flavor) -> None:
    script = StreamScript([cut(round_body(), 40, 41, 200)])
    outcome = stream(flavor, script, contact="a b/c", key="turn-1")
    assert outcome.raised is None
    assert outcome.events == ROUND_EVENTS
    (request,) = script.requests
    assert request.method == "POST"
    assert request.url.raw_path == b"/v1/contacts/a%20b%2Fc/messages/stream"
    assert json.loads(request.content) == {"text": "hello"}
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["idempotency-key"] == "turn-1"
    assert request.headers["x-tenant-id"] == "acme"


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_every_cut_of_the_body_reads_the_same(end: str) -> None:
    """Two reads cut anywhere (inside ``event:``, a ``data:`` line, a UTF-8
    character, between ``\\r`` and ``\\n``), or a byte per read: the same events."""
    body = round_body(end)
    for at in range(1, len(body)):
        assert stream("sync", StreamScript([cut(body, at)])).events == ROUND_EVENTS, f"cut at {at}: {body[:at]!r}"
    one_by_one = [body[i : i + 1] for i in range(len(body))]
    assert stream("sync", StreamScript([one_by_one])).events == ROUND_EVENTS
    assert stream("async", StreamScript([one_by_one])).events == ROUND_EVENTS


def test_the_decoder_reads_server_sent_events_as_the_standard_does() -> None:
    decoder = SseDecoder()
    text = (
        "\ufeffdata: one\ndata:two\n\n"  # a byte order mark; two data lines; no space after the colon
        "event: named\nid: 7\nretry: 10\nunknown\ndata:  padded\n\n"  # ignored fields; one space is dropped
        "event: empty\n\n"  # no data: not dispatched, and its name does not leak
        "data: after\n\n"
        "event: unfinished\ndata: never ends"
    )
    events = list(decoder.feed(text.encode()))
    assert events == [
        ServerSentEvent("message", "one\ntwo"),
        ServerSentEvent("named", " padded"),
        ServerSentEvent("message", "after"),
    ]
    assert list(decoder.feed(b"\n")) == []  # the data line ends; the event needs a blank line
    assert list(decoder.feed(b"\n")) == [ServerSentEvent("unfinished", "never ends")]
    # A "\r" ending one read and a "\n" opening a later one are one line end, empty reads between.
    assert [e for chunk in (b"data: x\r", b"", b"\ndata: y\n\n") for e in decoder.feed(chunk)] == [
        ServerSentEvent("message", "x\ny")
    ]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_replay_holding_only_done_yields_done(flavor: Flavor) -> None:
    outcome = stream(flavor, StreamScript([[sse("done", ANSWER)]]), key="turn-1")
    assert outcome == Outcome([Done(ANSWER)], None)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_nothing_after_done_is_read(flavor: Flavor) -> None:
    """``done`` is the last event: what follows it (a server's bug) is not shown."""
    body = sse("done", ANSWER) + sse("delta", {"text": "late", "call": 0}) + b"event: error\ndata: {"
    assert stream(flavor, StreamScript([[body]])) == Outcome([Done(ANSWER)], None)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_json_error_before_the_stream_raises_its_class(flavor: Flavor) -> None:
    for kind, status in TYPES.items():
        script = StreamScript([error(status, kind, f"about {kind}")])
        outcome = stream(flavor, script, retries=0)
        assert outcome.events == [] and type(outcome.raised) is ERROR_CLASSES[kind], kind
        assert isinstance(outcome.raised, DegrauError)
        assert (outcome.raised.status, outcome.raised.message) == (status, f"about {kind}")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_busy_answer_before_the_stream_is_retried_with_the_same_key(flavor: Flavor) -> None:
    time = FakeTime()
    script = StreamScript(
        [error(429, "rate_limited", retry_after="3"), error(503, "unavailable", retry_after="1"), [round_body()]]
    )
    outcome = stream(flavor, script, time=time)
    assert outcome == Outcome(ROUND_EVENTS, None)
    keys = script.keys()
    assert len(keys) == 3 and keys[0] is not None and len(set(keys)) == 1
    assert uuid.UUID(keys[0]).version == 4
    assert time.slept == [3.0, 1.0]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_stream_carries_a_key_of_its_own_even_without_retries(flavor: Flavor) -> None:
    """The key is how a cut-off stream is read again (a replay), retries or not."""
    script = StreamScript([[sse("delta", {"text": "Olá", "call": 0})]])
    outcome = stream(flavor, script, retries=0)
    (key,) = script.keys()
    assert key is not None and uuid.UUID(key).version == 4
    assert isinstance(outcome.raised, StreamInterrupted) and outcome.raised.idempotency_key == key


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_connection_that_fails_before_the_stream_is_retried(flavor: Flavor) -> None:
    script, time = StreamScript([httpx.ConnectError("refused"), [round_body()]]), FakeTime()
    outcome = stream(flavor, script, time=time)
    assert outcome == Outcome(ROUND_EVENTS, None)
    assert len(script.requests) == 2 and len(set(script.keys())) == 1 and len(time.slept) == 1


@pytest.mark.parametrize("flavor", FLAVORS)
def test_an_error_event_raises_its_class_after_the_events_before_it_and_is_not_retried(flavor: Flavor) -> None:
    failure = {"status": 503, "error": {"type": "unavailable", "message": "the model is overloaded"}}
    body = sse("delta", {"text": "Olá", "call": 0}) + sse("error", failure)
    script = StreamScript([[body], [round_body()]])
    time = FakeTime()
    outcome = stream(flavor, script, time=time)
    assert outcome.events == [TextDelta("Olá", 0)]
    assert isinstance(outcome.raised, Unavailable)
    assert (outcome.raised.status, outcome.raised.type, outcome.raised.message) == (
        503,
        "unavailable",
        "the model is overloaded",
    )
    assert outcome.raised.body == failure
    assert len(script.requests) == 1 and time.slept == []


@pytest.mark.parametrize("flavor", FLAVORS)
def test_error_events_map_as_the_json_route_statuses_and_types_do(flavor: Flavor) -> None:
    for kind, status in TYPES.items():
        body = sse("error", {"status": status, "error": {"type": kind, "message": kind}})
        raised = stream(flavor, StreamScript([[body]])).raised
        assert type(raised) is ERROR_CLASSES[kind] and isinstance(raised, DegrauError), kind
        assert raised.status == status
    novel = sse("error", {"status": 507, "error": {"type": "novel_error", "message": "new"}})
    raised = stream(flavor, StreamScript([[novel]])).raised
    assert type(raised) is APIStatusError and isinstance(raised, DegrauError)
    assert (raised.status, raised.type, raised.message) == (507, "novel_error", "new")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_stream_cut_before_done_raises_stream_interrupted_with_the_key_and_is_not_retried(flavor: Flavor) -> None:
    delta = sse("delta", {"text": "Olá", "call": 0})
    for chunks in (
        [delta],  # the body ended cleanly, without done
        [delta, b'event: done\ndata: {"session"'],  # inside done
        [delta, httpx.RemoteProtocolError("peer closed connection without sending complete message body")],
        [delta, httpx.ReadTimeout("timed out")],
    ):
        script, time = StreamScript([chunks, [round_body()]]), FakeTime()
        outcome = stream(flavor, script, time=time)
        assert outcome.events == [TextDelta("Olá", 0)], chunks
        assert isinstance(outcome.raised, StreamInterrupted), chunks
        (key,) = script.keys()
        assert key is not None and outcome.raised.idempotency_key == key
        assert key in str(outcome.raised)
        assert time.slept == []


@pytest.mark.parametrize("flavor", FLAVORS)
def test_the_stream_goes_to_stream_base_url_and_the_rest_to_base_url(flavor: Flavor) -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.path.endswith("/stream"):
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse("done", ANSWER))
        return httpx.Response(200, json={"session": {}})

    async def async_answer(request: httpx.Request) -> httpx.Response:
        return answer(request)

    streams = "https://stream.example/prod/"
    if flavor == "sync":
        client = DegrauClient("http://degrau.test", stream_base_url=streams, transport=httpx.MockTransport(answer))
        assert list(client.stream_message("ana", "hi")) == [Done(ANSWER)]
        client.memory("ana")
        default = DegrauClient("http://degrau.test/", transport=httpx.MockTransport(answer))
        assert list(default.stream_message("ana", "hi")) == [Done(ANSWER)]
    else:

        async def main() -> None:
            transport = httpx.MockTransport(async_answer)
            async with AsyncDegrauClient("http://degrau.test", stream_base_url=streams, transport=transport) as client:
                assert [e async for e in client.stream_message("ana", "hi")] == [Done(ANSWER)]
                await client.memory("ana")
            async with AsyncDegrauClient("http://degrau.test/", transport=transport) as default:
                assert [e async for e in default.stream_message("ana", "hi")] == [Done(ANSWER)]

        asyncio.run(main())
    assert seen == [
        "https://stream.example/prod/v1/contacts/ana/messages/stream",
        "http://degrau.test/v1/contacts/ana/memory",
        "http://degrau.test/v1/contacts/ana/messages/stream",
    ]


def test_both_clients_send_and_yield_the_same() -> None:
    for chunks in ([round_body()], [sse("delta", {"text": "x", "call": 0}), httpx.ReadError("reset")]):
        sync_script, async_script = StreamScript([chunks]), StreamScript([chunks])
        sync, in_async = stream("sync", sync_script, key="k"), stream("async", async_script, key="k")
        assert sync.events == in_async.events
        assert type(sync.raised) is type(in_async.raised)
        sent = [(r.method, str(r.url), dict(r.headers), r.content) for r in sync_script.requests]
        assert sent == [(r.method, str(r.url), dict(r.headers), r.content) for r in async_script.requests]


# A real server: the events reach the caller as they are sent.


@dataclass
class Pause:
    """The server waits here until the test lets it go on (at most 5 s)."""

    go_on: threading.Event = field(default_factory=threading.Event)
    waited_out: bool = False


#: What the server does, in order: send a chunk (and flush), pause, or drop the
#: connection without ending the body.
Action = bytes | Pause | Literal["drop"]


class SseServer(ThreadingHTTPServer):
    """An HTTP/1.1 server that answers every POST with ``actions``, in chunked
    transfer encoding, flushing each chunk."""

    daemon_threads = True

    def __init__(self, actions: list[Action]) -> None:
        super().__init__(("127.0.0.1", 0), _SseHandler)
        self.actions = actions

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _SseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SseServer

    def log_message(self, *_: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for action in self.server.actions:
            if isinstance(action, Pause):
                action.waited_out = not action.go_on.wait(timeout=5)
            elif action == "drop":
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            else:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(action), action))
                self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[SseServer] = []

    def start(actions: list[Action]) -> SseServer:
        server = SseServer(actions)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_delta_reaches_the_caller_while_the_round_is_still_running(flavor: Flavor, serve: Any) -> None:
    pause = Pause()
    server = serve([sse("delta", {"text": "Olá", "call": 0}), pause, sse("done", ANSWER)])
    events: list[StreamEvent] = []

    def on(event: StreamEvent) -> None:
        # The server holds done back until the caller has the delta: a client
        # that waited for the whole body would see the pause run out first.
        events.append(event)
        pause.go_on.set()

    if flavor == "sync":
        with DegrauClient(server.url, retries=0) as client:
            for event in client.stream_message("ana", "hello"):
                on(event)
    else:

        async def main() -> None:
            async with AsyncDegrauClient(server.url, retries=0) as client:
                async for event in client.stream_message("ana", "hello"):
                    on(event)

        asyncio.run(main())
    assert events == [TextDelta("Olá", 0), Done(ANSWER)]
    assert pause.waited_out is False


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_connection_dropped_mid_stream_raises_stream_interrupted(flavor: Flavor, serve: Any) -> None:
    server = serve([sse("delta", {"text": "Olá", "call": 0}), "drop"])
    events: list[StreamEvent] = []
    with pytest.raises(StreamInterrupted) as raised:
        if flavor == "sync":
            with DegrauClient(server.url) as client:
                events.extend(client.stream_message("ana", "hello", idempotency_key="turn-9"))
        else:

            async def main() -> None:
                async with AsyncDegrauClient(server.url) as client:
                    async for event in client.stream_message("ana", "hello", idempotency_key="turn-9"):
                        events.append(event)

            asyncio.run(main())
    assert events == [TextDelta("Olá", 0)]
    assert raised.value.idempotency_key == "turn-9"
    assert isinstance(raised.value.__cause__, httpx.TransportError)


# On the local stack.


def streamed_reply(events: list[StreamEvent]) -> str:
    """The reply's text as a chat shows it: the last model call's deltas, since the
    last restart (a tool round's earlier call is its preamble)."""
    shown: list[TextDelta] = []
    for event in events:
        if isinstance(event, Restart):
            shown = []
        elif isinstance(event, TextDelta):
            shown.append(event)
    last_call = max((d.call for d in shown), default=0)
    return "".join(d.text for d in shown if d.call == last_call)


def test_a_streamed_rounds_deltas_are_its_reply(stack: Stack, tenant: str) -> None:
    with DegrauClient(stack.api, tenant=tenant, timeout=120) as degrau:
        events = list(degrau.stream_message("ana", "Hi, I am Ana. Any free slots on 2026-12-04?"))
    assert isinstance(events[-1], Done)
    assert sum(isinstance(e, Done) for e in events) == 1
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert deltas, "the reply came in deltas"
    assert streamed_reply(events) == events[-1].response["reply"]["text"]
    started = [(e.id, e.name) for e in events if isinstance(e, ToolStarted)]
    assert started == [(e.id, e.name) for e in events if isinstance(e, ToolFinished)]
    # Without "stream_tool_input" in the tenant's configuration, no tool input.
    assert all(e.input is None for e in events if isinstance(e, ToolStarted))


def test_a_replay_with_the_same_key_is_done_alone_with_the_same_body(stack: Stack, tenant: str) -> None:
    with DegrauClient(stack.api, tenant=tenant, timeout=120) as degrau:
        first = list(degrau.stream_message("bea", "Hello there", idempotency_key="bea-turn-1"))
        again = list(degrau.stream_message("bea", "Hello there", idempotency_key="bea-turn-1"))
        assert isinstance(first[-1], Done)
        assert again == [first[-1]]
        # Stored once: one round of two messages.
        assert degrau.memory("bea")["session"]["last_seq"] == 2


def test_done_is_what_the_json_route_answers(stack: Stack, tenant: str) -> None:
    text = "Hi, I am Cai. Any free slots on 2026-12-04?"
    with stack.client(tenant) as checked, DegrauClient(stack.api, tenant=tenant, timeout=120) as degrau:
        answered = checked.send_message("cai", text)
        events = list(degrau.stream_message("dan", text))
    done = events[-1]
    assert isinstance(done, Done)
    # done's body fits the JSON route's 200 schema (raises Undescribed if not)...
    check("POST", "/v1/contacts/dan/messages", 200, json.dumps(done.response).encode())
    # ...and holds what the JSON route answered for the same first round of another contact.
    assert done.response.keys() == answered.keys()
    for name in ("session", "reply", "round", "compaction_queued"):
        assert done.response[name] == answered[name], name
    assert done.response["usage"].keys() == answered["usage"].keys()
    assert done.response["usage"]["output_tokens"] == answered["usage"]["output_tokens"]


def test_a_key_reused_with_another_text_is_refused_before_the_stream(stack: Stack, tenant: str) -> None:
    with DegrauClient(stack.api, tenant=tenant, timeout=120, retries=0) as degrau:
        list(degrau.stream_message("eva", "Hello", idempotency_key="eva-1"))
        events: list[StreamEvent] = []
        with pytest.raises(IdempotencyMismatch) as raised:
            events.extend(degrau.stream_message("eva", "Another text", idempotency_key="eva-1"))
    assert raised.value.status == 422 and events == []
