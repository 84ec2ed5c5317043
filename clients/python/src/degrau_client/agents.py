"""degrau as the memory of a LangChain 1.x agent (``langchain.agents.create_agent``),
through the framework's middleware (the ``agents`` extra)::

    from langchain.agents import create_agent
    from degrau_client.agents import DegrauMiddleware

    agent = create_agent(model, tools=[...], middleware=[DegrauMiddleware(degrau)])
    agent.invoke({"messages": [{"role": "user", "content": "Any slot on Friday?"}]},
                 context={"contact": "ana"})

One run answers one user message, with the agent's own model and tools:

- ``before_agent`` reads the contact's ``GET .../context`` once, into the run's
  state (private to the middleware: ``degrau_context``, ``degrau_head``);
- ``wrap_model_call`` sends every model call of the run the context before the
  run's round: degrau's two system blocks after the agent's own system prompt
  (the tenant's instructions, then the fenced contact context with the facts and
  the summary, each with its cache breakpoint), the window, then the user's message
  and the run's tool calls and results so far. The state keeps only the run's
  messages: the window is not copied into it;
- ``after_agent`` commits the run's round (``POST .../rounds``: the user's message,
  every tool call and result, the final answer) on the head read, with the final
  answer's usage (see :func:`~degrau_client.langchain.messages_api_usage`; none:
  degrau estimates it), retried on a stale head as the message history does, and
  puts degrau's answer in the state's ``degrau_recorded``.

The contact is the run's ``context["contact"]`` (``create_agent(...,
context_schema=...)`` with a ``contact`` field, or a plain dict), else
``config["configurable"]["contact"]``, else the middleware's own ``contact``. A
checkpointer may keep its own state beside degrau: the round committed is always
the state's messages from its last human message on. The same rules and refusals
as the history apply (:class:`~degrau_client.langchain.RoundBuilder`).

Both flavours: ``agent.invoke`` needs a :class:`~degrau_client.DegrauClient`;
``agent.ainvoke`` takes either (the async hooks call an
:class:`~degrau_client.AsyncDegrauClient` natively, a sync one in a thread).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import OmitFromInput, PrivateStateAttr
from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from .aio import AsyncDegrauClient
from .client import DegrauClient, RecordedRound
from .langchain import (
    acommit_with_retry,
    acontext,
    commit_with_retry,
    context_messages,
    messages_api_usage,
    round_messages,
    sync_client,
    whole_round,
)

__all__ = ["DegrauAgentState", "DegrauMiddleware"]


class DegrauAgentState(AgentState[Any]):
    """The agent's state with what the middleware keeps for the run."""

    #: The contact's system blocks and window (LangChain messages), read before
    #: the run.
    degrau_context: NotRequired[Annotated[list[AnyMessage], PrivateStateAttr]]
    #: The head the round is committed on.
    degrau_head: NotRequired[Annotated[str, PrivateStateAttr]]
    #: degrau's answer to the round's commit.
    degrau_recorded: NotRequired[Annotated[RecordedRound, OmitFromInput]]


def _blocks(message: BaseMessage) -> list[Any]:
    content = message.content
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


class DegrauMiddleware(AgentMiddleware[DegrauAgentState, Any, Any]):
    """Keeps a LangChain agent's conversation in degrau (see the module
    documentation)."""

    state_schema = DegrauAgentState

    def __init__(
        self,
        client: DegrauClient | AsyncDegrauClient,
        *,
        contact: str | None = None,
        anthropic_blocks: bool = True,
        max_commit_attempts: int = 3,
    ) -> None:
        super().__init__()
        self.client = client
        self.contact = contact
        self.anthropic_blocks = anthropic_blocks
        self.max_commit_attempts = max_commit_attempts

    def _contact(self, runtime: Runtime[Any]) -> str:
        context = runtime.context
        found = context.get("contact") if isinstance(context, Mapping) else getattr(context, "contact", None)
        if not found:
            try:
                from langgraph.config import get_config

                found = (get_config().get("configurable") or {}).get("contact")
            except RuntimeError:  # outside a run
                found = None
        found = found or self.contact
        if not isinstance(found, str) or not found:
            raise ValueError('run the agent with context={"contact": ...} (or give DegrauMiddleware a contact)')
        return found

    def _loaded(self, context: Any) -> dict[str, Any]:
        return {
            "degrau_context": context_messages(context, anthropic_blocks=self.anthropic_blocks),
            "degrau_head": context["head"],
        }

    def before_agent(self, state: DegrauAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._loaded(sync_client(self.client, "agent.ainvoke").context(self._contact(runtime)))

    async def abefore_agent(self, state: DegrauAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._loaded(await acontext(self.client, self._contact(runtime)))

    def _with_context(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The model request with degrau's system blocks after the agent's own, and
        the window before the run's round."""
        context = cast("list[AnyMessage]", request.state.get("degrau_context") or [])
        system = [m for m in context if isinstance(m, SystemMessage)]
        window: list[AnyMessage] = [m for m in context if not isinstance(m, SystemMessage)]
        blocks = [block for m in system for block in _blocks(m)]
        if request.system_message is not None:
            blocks = [*_blocks(request.system_message), *blocks]
        run: list[AnyMessage] = list(round_messages(request.messages))  # type: ignore[arg-type]
        return request.override(
            system_message=SystemMessage(content=blocks) if blocks else None,
            messages=[*window, *run],
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(self._with_context(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(self._with_context(request))

    def after_agent(self, state: DegrauAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages, final = whole_round(state["messages"])
        recorded = commit_with_retry(
            sync_client(self.client, "agent.ainvoke"),
            self._contact(runtime),
            state["degrau_head"],
            messages,
            messages_api_usage(final),
            attempts=self.max_commit_attempts,
        )
        return {"degrau_recorded": recorded}

    async def aafter_agent(self, state: DegrauAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages, final = whole_round(state["messages"])
        recorded = await acommit_with_retry(
            self.client,
            self._contact(runtime),
            state["degrau_head"],
            messages,
            messages_api_usage(final),
            attempts=self.max_commit_attempts,
        )
        return {"degrau_recorded": recorded}
