"""Streamed replies (``POST /v1/contacts/{contact}/messages/stream``), free of I/O:
the typed events, the reading of Server-Sent Events from bytes however they are
cut, and what each event means to the caller.

The route answers a round as it happens: ``delta`` (answer text as the model writes
it), ``tool_started`` / ``tool_finished``, ``restart`` (forget what was shown, the
round starts over), then ``done`` (exactly ``send_message``'s answer; the round is
stored) or ``error`` (nothing was stored). Unknown event names and comment lines are
skipped, so a newer server's events do not break an older client. Both clients feed
the bytes they read to an :class:`EventReader`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .errors import APIConnectionError, error_from_body
from .models import JSON

#: A line's end: CRLF, LF or CR alone.
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class TextDelta:
    """Answer text as the model writes it. ``call`` is which model call of the
    round wrote it (0, 1, …: a tool round's answer after the tool is call 1)."""

    text: str
    call: int


@dataclass(frozen=True)
class ToolStarted:
    """A tool call is about to run. ``input`` is the tool's input only when the
    tenant's configuration has ``"stream_tool_input": true``; else None."""

    id: str
    name: str
    input: JSON | None = None


@dataclass(frozen=True)
class ToolFinished:
    """A tool call ran; ``is_error``: it answered an error (the model sees it)."""

    id: str
    name: str
    is_error: bool


@dataclass(frozen=True)
class Restart:
    """Everything this stream showed so far is void: the round's events start over
    from the beginning (rare: a commit race answered again, a cut-off tool call
    asked again). A chat clears the answer it printed."""

    reason: str


@dataclass(frozen=True)
class Done:
    """The round is stored; the last event. ``response`` is exactly what
    :meth:`~degrau_client.DegrauClient.send_message` returns for it."""

    response: JSON


#: One event of a streamed round.
StreamEvent: TypeAlias = TextDelta | ToolStarted | ToolFinished | Restart | Done


class StreamInterrupted(APIConnectionError):
    """The stream ended (the connection dropped or closed) before its ``done`` or
    ``error`` event (an :class:`~degrau_client.APIConnectionError`: no answer to
    read). The round goes on on the server and is stored whole or not at
    all: send the same request again with ``idempotency_key`` (the caller's, or the
    one the client made for this call) to get its ``done`` (a replay), or a
    :class:`~degrau_client.Conflict` while it is still running."""

    def __init__(self, message: str, idempotency_key: str) -> None:
        super().__init__(message)
        self.idempotency_key = idempotency_key


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched Server-Sent Event: its name (``message`` when unnamed) and
    its data lines joined by newlines."""

    event: str
    data: str


@dataclass
class SseDecoder:
    """The Server-Sent Events of a byte stream, as the WHATWG rules read them:
    lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a blank line dispatches the
    event; ``:`` starts a comment; a field's value loses one leading space; an
    event without data is dropped, as is an unfinished one when the stream ends.

    Bytes are cut into lines before they are decoded, so a chunk that ends inside a
    UTF-8 character, a line, or between the ``\\r`` and ``\\n`` of one line end
    reads the same as the whole."""

    _pending: bytearray = field(default_factory=bytearray)
    #: The last chunk ended with ``\\r``: a ``\\n`` opening the next is that line's end.
    _after_cr: bool = False
    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _started: bool = False

    def feed(self, chunk: bytes) -> Iterator[ServerSentEvent]:
        """The events that ``chunk`` completes."""
        if not chunk:
            return  # keeps a "\r" that ended the last chunk pending
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = False
        self._pending += chunk
        start = 0
        while (end := _LINE_END.search(self._pending, start)) is not None:
            if end.group() == b"\r" and end.end() == len(self._pending):
                # Maybe the first half of "\r\n": a "\n" opening the next chunk is skipped.
                self._after_cr = True
            line = bytes(self._pending[start : end.start()])
            start = end.end()
            event = self._line(line)
            if event is not None:
                yield event
        del self._pending[:start]

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        if not self._started:
            self._started = True
            raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte order mark opening the stream
        line = raw.decode("utf-8", errors="replace")
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = ServerSentEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        # "id", "retry" and unknown fields mean nothing to this route.
        return None


def _object(data: str, event: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as error:
        raise ValueError(f"the stream's {event} event holds no JSON: {data[:200]!r}") from error
    if not isinstance(value, dict):
        raise ValueError(f"the stream's {event} event holds no JSON object: {data[:200]!r}")
    return value


def stream_event(sse: ServerSentEvent) -> StreamEvent | None:
    """The typed event of one Server-Sent Event; None for a name this client does
    not know (skipped); an ``error`` event raised as the :class:`APIStatusError` its
    status and type name, as the JSON route would have raised it."""
    if sse.event == "delta":
        data = _object(sse.data, sse.event)
        return TextDelta(text=str(data["text"]), call=int(data.get("call", 0)))
    if sse.event == "tool_started":
        data = _object(sse.data, sse.event)
        return ToolStarted(id=str(data["id"]), name=str(data["name"]), input=data.get("input"))
    if sse.event == "tool_finished":
        data = _object(sse.data, sse.event)
        return ToolFinished(id=str(data["id"]), name=str(data["name"]), is_error=bool(data.get("is_error", False)))
    if sse.event == "restart":
        return Restart(reason=str(_object(sse.data, sse.event).get("reason", "")))
    if sse.event == "done":
        return Done(response=_object(sse.data, sse.event))
    if sse.event == "error":
        data = _object(sse.data, sse.event)
        status = data.get("status")
        raise error_from_body(status if isinstance(status, int) else 500, data, None, sse.data)
    return None


@dataclass
class EventReader:
    """A streamed round's events from its bytes: :meth:`feed` each chunk read,
    :meth:`end` when the body ends. The reader stops at ``done`` (:attr:`done`),
    raises at ``error``, and :meth:`end` raises :class:`StreamInterrupted` when the
    body ended before either."""

    idempotency_key: str
    done: bool = False
    _sse: SseDecoder = field(default_factory=SseDecoder)

    def feed(self, chunk: bytes) -> Iterator[StreamEvent]:
        for sse in self._sse.feed(chunk):
            if self.done:
                return
            event = stream_event(sse)
            if event is None:
                continue
            self.done = isinstance(event, Done)
            yield event

    def end(self) -> None:
        if not self.done:
            raise self.interrupted("the stream ended before its done or error event")

    def interrupted(self, why: str) -> StreamInterrupted:
        return StreamInterrupted(
            f"{why}; the round is stored whole or not at all: send it again with "
            f"idempotency_key={self.idempotency_key!r} to read its answer",
            self.idempotency_key,
        )


__all__ = [
    "Done",
    "EventReader",
    "Restart",
    "ServerSentEvent",
    "SseDecoder",
    "StreamEvent",
    "StreamInterrupted",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "stream_event",
]
