"""Every answer the stack tests receive, held to ``docs/openapi.json``.

:class:`CheckedTransport` (and its async twin) wraps httpx's transport: each answer
of degrau's API is matched to its operation (method and path template) and status,
and its body validated against that response's schema with ``jsonschema``
(draft 2020-12, the dialect of OpenAPI 3.1), errors included. An answer the
document does not describe raises :class:`Undescribed` in the test that received
it. The Rust end-to-end tests make the same check (``tests/src/openapi.rs``).
:func:`documented` is the other side, for offline tests: a mock API that takes
only requests the document describes and answers its examples.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import httpx

DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"


class Undescribed(AssertionError):
    """An answer ``docs/openapi.json`` does not describe."""


@cache
def _document() -> dict[str, Any]:
    return json.loads(DOCUMENT.read_text())


@cache
def _templates() -> list[tuple[re.Pattern[str], str]]:
    def segment(part: str) -> str:
        return "[^/]+" if part.startswith("{") and part.endswith("}") else re.escape(part)

    return [(re.compile("^" + "/".join(map(segment, t.split("/"))) + "$"), t) for t in _document()["paths"]]


@cache
def _validator(schema_json: str) -> Any:
    # Imported here: the package itself does not depend on jsonschema (check.sh
    # installs it beside the wheel, for the tests).
    from jsonschema import Draft202012Validator

    root = {"components": _document()["components"], "allOf": [json.loads(schema_json)]}
    return Draft202012Validator(root)


def _resolve(value: dict[str, Any]) -> dict[str, Any]:
    ref = value.get("$ref")
    if ref is None:
        return value
    node: Any = _document()
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def check(method: str, path: str, status: int, body: bytes) -> None:
    """Raises :class:`Undescribed` unless the document describes this answer."""
    template = next((t for pattern, t in _templates() if pattern.match(path)), None)
    operation = _document()["paths"][template].get(method.lower()) if template else None
    if operation is None:
        if not 400 <= status < 500:
            raise Undescribed(f"{method} {path} is not in docs/openapi.json, yet answered {status}")
        schema: dict[str, Any] | None = {"$ref": "#/components/schemas/Error"}
        name = f"{method} {path} (no such operation)"
    else:
        name = operation["operationId"]
        response = operation["responses"].get(str(status))
        if response is None:
            raise Undescribed(f"{name} answered {status}, a status it does not list: {body[:500]!r}")
        schema = _resolve(response).get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        if body:
            raise Undescribed(f"{name} answered {status} with a body the document does not promise")
        return
    try:
        instance = json.loads(body)
    except ValueError as e:
        raise Undescribed(f"{name} answered {status} with a body that is not JSON: {body[:500]!r}") from e
    errors = [
        f"at {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in _validator(json.dumps(schema, sort_keys=True)).iter_errors(instance)
    ]
    if errors:
        raise Undescribed(f"{name}'s {status} answer does not fit its schema: {errors}; body: {body[:500]!r}")


def _check_response(request: httpx.Request, response: httpx.Response) -> None:
    path = request.url.raw_path.split(b"?")[0].decode()
    check(request.method, path, response.status_code, response.content)


class CheckedTransport(httpx.HTTPTransport):
    """httpx's transport, with every answer checked against the document."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.read()
        _check_response(request, response)
        return response


class AsyncCheckedTransport(httpx.AsyncHTTPTransport):
    """The async twin of :class:`CheckedTransport`."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        await response.aread()
        _check_response(request, response)
        return response


def example(operation_id: str) -> Any:
    """The (first) 200 example the document gives for an operation."""
    for methods in _document()["paths"].values():
        for operation in methods.values():
            if isinstance(operation, dict) and operation.get("operationId") == operation_id:
                answer = _resolve(operation["responses"]["200"])["content"]["application/json"]
                return next(iter(answer["examples"].values()))["value"]
    raise KeyError(operation_id)


def _operation(method: str, path: str) -> tuple[str, dict[str, Any]]:
    template = next((t for pattern, t in _templates() if pattern.match(path)), None)
    operation = _document()["paths"][template].get(method.lower()) if template else None
    if template is None or operation is None:
        raise Undescribed(f"{method} {path} is not an operation of docs/openapi.json")
    return template, operation


def documented(request: httpx.Request) -> httpx.Response:
    """The API as its document describes it, for a mock transport: checks that
    ``request`` is one of its operations, with every required header parameter
    (``If-Match``) and a body that fits the operation's request schema, and answers
    the 200 example the document gives (held to its schema by :func:`check`)."""
    request.read()
    path = request.url.raw_path.split(b"?")[0].decode()
    template, operation = _operation(request.method, path)
    parameters = [
        _resolve(p) for p in [*_document()["paths"][template].get("parameters", []), *operation.get("parameters", [])]
    ]
    for parameter in parameters:
        if parameter["in"] == "header" and parameter.get("required") and parameter["name"] not in request.headers:
            raise Undescribed(f"{operation['operationId']} without its required header {parameter['name']}")
        if parameter["in"] == "query" and parameter["name"] in request.url.params:
            value: Any = request.url.params[parameter["name"]]
            if parameter["schema"].get("type") == "integer":
                value = int(value)
            _fits(f"{operation['operationId']}'s {parameter['name']}", parameter["schema"], value)
    body_schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body_schema is not None:
        _fits(f"{operation['operationId']}'s body", body_schema, json.loads(request.content))
    elif request.content:
        raise Undescribed(f"{operation['operationId']} sent a body it does not take")
    body = json.dumps(example(operation["operationId"])).encode()
    check(request.method, path, 200, body)
    return httpx.Response(200, content=body, headers={"content-type": "application/json"})


def _fits(what: str, schema: dict[str, Any], instance: Any) -> None:
    errors = [e.message for e in _validator(json.dumps(schema, sort_keys=True)).iter_errors(instance)]
    if errors:
        raise Undescribed(f"{what} does not fit its schema: {errors}")
