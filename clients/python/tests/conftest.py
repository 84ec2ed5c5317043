"""The local stack for the client's tests: ``infra/stack.sh start`` (moto, the
table and queues, the offline stand-in, both functions under ``cargo lambda
watch``, the bridge running the compactor), stopped after the session. Its ports
come from ``DEGRAU_API_PORT``, ``DEGRAU_STANDIN_PORT`` and ``DEGRAU_MOTO_PORT``
(stack.sh's defaults otherwise). ``DEGRAU_TEST_STACK=running`` uses a stack
already up instead: the API at ``DEGRAU_API_URL`` (default ``.local/api.url``),
the stand-in at ``DEGRAU_STANDIN_URL`` (default port ``DEGRAU_STANDIN_PORT``).

Every test that uses the stack (the ``stack`` fixture, or ``client`` built on it)
is marked ``stack``: ``-m "not stack"`` runs the offline ones alone, as
``clients/python/check.sh`` does against the installed wheel."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from degrau_client import DegrauClient
from openapi_check import CheckedTransport

ROOT = Path(__file__).resolve().parents[3]
STATE = ROOT / ".local"


#: Every operator scope (``X-Scopes`` under ``AUTH_MODE=dev``).
ALL_SCOPES = ("memory:read", "memory:write", "tenant:admin")


@dataclass
class Stack:
    api: str
    standin: str

    def client(
        self, tenant: str | None, *, scopes: tuple[str, ...] | None = None, operator: str | None = None
    ) -> DegrauClient:
        """A client whose every answer is checked against docs/openapi.json."""
        return DegrauClient(
            self.api, tenant=tenant, scopes=scopes, operator=operator, timeout=120, transport=CheckedTransport()
        )

    def configure(self, tenant: str, config: dict[str, Any]) -> None:
        """Replaces the tenant's configuration through ``PUT /v1/tenant/config``
        (validated by the server, as an operator's would be)."""
        with self.client(tenant, scopes=("tenant:admin",)) as admin:
            admin.put_tenant_config(config, admin.get_tenant_config()["etag"])

    def standin_log(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.standin}/stand-in/requests", timeout=30).json()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.stack)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    # DEGRAU_TEST_STACK=running: use the stack already started on these ports.
    owned = os.environ.get("DEGRAU_TEST_STACK") != "running"
    if owned:
        subprocess.run(["bash", "infra/stack.sh", "start"], cwd=ROOT, env=env, check=True)
    try:
        standin_port = os.environ.get("DEGRAU_STANDIN_PORT", "4010")
        yield Stack(
            api=os.environ.get("DEGRAU_API_URL") or (STATE / "api.url").read_text().strip(),
            standin=os.environ.get("DEGRAU_STANDIN_URL") or f"http://127.0.0.1:{standin_port}",
        )
    finally:
        if owned:
            subprocess.run(["bash", "infra/stack.sh", "stop"], cwd=ROOT, env=env, check=False)


@pytest.fixture
def tenant() -> str:
    """A tenant of its own per test."""
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(stack: Stack, tenant: str) -> Iterator[DegrauClient]:
    with stack.client(tenant) as client:
        yield client


@pytest.fixture(autouse=True)
def fresh_async_model_client() -> Iterator[None]:
    """langchain-anthropic keeps one async httpx client per base URL for the whole
    process (an ``lru_cache``), bound to the event loop that first used it; each
    async test runs its own loop (``asyncio.run``), so the cache is emptied after
    every test, or a later async test meets "Event loop is closed"."""
    yield
    try:
        from langchain_anthropic._client_utils import _get_default_async_httpx_client
    except ImportError:  # the offline venv may lack it; nothing cached then
        return
    _get_default_async_httpx_client.cache_clear()
