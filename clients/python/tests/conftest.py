"""The local stack for the client's tests: ``infra/stack.sh start`` (moto, the
table and queues, the offline stand-in, both functions under ``cargo lambda
watch``, the bridge running the compactor), stopped after the session. Its ports
come from ``DEGRAU_API_PORT``, ``DEGRAU_STANDIN_PORT`` and ``DEGRAU_MOTO_PORT``
(stack.sh's defaults otherwise).

Every test that uses the stack (the ``stack`` fixture, or ``client`` built on it)
is marked ``stack``: ``-m "not stack"`` runs the offline ones alone, as
``clients/python/check.sh`` does against the installed wheel."""

from __future__ import annotations

import json
import os
import shlex
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


@dataclass
class Stack:
    api: str
    standin: str
    moto: str
    table: str

    def client(self, tenant: str | None) -> DegrauClient:
        """A client whose every answer is checked against docs/openapi.json."""
        return DegrauClient(self.api, tenant=tenant, timeout=120, transport=CheckedTransport())

    def configure(self, tenant: str, config: dict[str, Any]) -> None:
        """Writes the tenant's CONFIG item, as the DynamoDB adapter lays it out."""
        import boto3  # the stack's tools (.venv), not the offline tests'

        dynamodb = boto3.client(
            "dynamodb",
            endpoint_url=self.moto,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        dynamodb.put_item(
            TableName=self.table,
            Item={
                "pk": {"S": f"T#{tenant}"},
                "sk": {"S": "CONFIG"},
                "config": {"S": json.dumps(config)},
            },
        )

    def standin_log(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.standin}/stand-in/requests", timeout=30).json()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.stack)


def _env_file(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        name, _, value = line.partition("=")
        out[name] = shlex.split(value)[0] if value else ""
    return out


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    # DEGRAU_TEST_STACK=running: use the stack already started on these ports.
    owned = os.environ.get("DEGRAU_TEST_STACK") != "running"
    if owned:
        subprocess.run(["bash", "infra/stack.sh", "start"], cwd=ROOT, env=env, check=True)
    try:
        provisioned = _env_file(STATE / "provision.env")
        yield Stack(
            api=(STATE / "api.url").read_text().strip(),
            standin=f"http://127.0.0.1:{os.environ.get('DEGRAU_STANDIN_PORT', '4010')}",
            moto=f"http://127.0.0.1:{(STATE / 'moto.port').read_text().strip()}",
            table=provisioned["TABLE_NAME"],
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
