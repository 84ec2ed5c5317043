"""The LangChain 1.x agent example (examples/langchain_agent.py) run as a user runs
it, on the local stack and the offline stand-in: its turns answered (tool rounds
included), its rounds committed, then ``--new-chat`` opening session 2."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "langchain_agent.py"


def run(stack: Any, tenant: str, contact: str, *extra: str) -> str:
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": stack.standin,
        "ANTHROPIC_API_KEY": "offline-stand-in",
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--api", stack.api, "--tenant", tenant, "--contact", contact, *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_agent_example_answers_commits_and_starts_a_new_chat(stack: Any, client: Any, tenant: str) -> None:
    contact = f"example-{uuid.uuid4().hex[:8]}"
    out = run(stack, tenant, contact, "--turns", "6")
    assert out.count("[offline stand-in]") == 6, out
    stored = client.transcript_messages(contact)
    assert any(b["type"] == "tool_use" for m in stored for b in m["content"]), "the agent's own tools ran"
    assert client.memory(contact)["session"]["number"] == 1
    out = run(stack, tenant, contact, "--turns", "1", "--new-chat")
    assert "closed session 1; the next round is session 2" in out
    assert client.memory(contact)["session"]["number"] == 2
