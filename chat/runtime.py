"""The Django side of a turn: which agent, model, history and tools a user message runs with.

`DjangoRuntime.stream()` builds an `AgentTurn` (agents/turn.py, plain asyncio) for the controller;
everything read from the database is read here, once, before the turn starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from accounts.credentials import USER_ENDED
from agents.contract import ChatRequest, InputError, StreamClosed, TurnEvent, TurnResult
from agents.demo import DemoModelClient
from agents.llm import OpenAIModelClient
from agents.models import ToolSetting
from agents.sandbox.site import get_sandbox, workspace_dir
from agents.services import ModelChoice, agent_get, model_choice_for, models_allowed
from agents.tools import Tool, ToolContext, registry
from agents.turn import AgentTurn
from agentsite.db import database_call, database_sync_to_async, select_row
from audit.services import TurnAudit
from chat.models import Session
from chat.quota import workspace_quota
from chat.store import DjangoTurnRecorder, history_for_model
from chat.usage import budget_refusal


def may_run_unsandboxed(user_id: int) -> bool:
    """Whether the user holds `agents.run_unsandboxed` (superusers hold every permission)."""
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    return user is not None and user.has_perm("agents.run_unsandboxed")


@dataclass(frozen=True)
class AgentTools:
    """An agent's tools for a turn: those switched on, the names of those switched off, and whether some
    are not known yet (an MCP server never listed: discovered before the turn, agents/tools/base.py)."""

    enabled: list[Tool]
    disabled: frozenset[str]
    undiscovered: bool


def agent_tools(agent_name: str) -> AgentTools:
    switches = dict(ToolSetting.objects.filter(agent_id=agent_name).values_list("tool", "enabled"))
    found = registry.for_agent(agent_name)
    enabled = [tool for tool in found.tools if switches.get(tool.name, tool.default_enabled)]
    disabled = frozenset(tool.name for tool in found.tools) - {tool.name for tool in enabled}
    return AgentTools(enabled=enabled, disabled=disabled, undiscovered=found.undiscovered)


@dataclass
class TurnSetup:
    choice: ModelChoice
    system_prompt: str
    history: list[dict[str, Any]]
    tools: list[Tool]
    specs: list[dict[str, Any]]
    disabled_tools: frozenset[str]
    undiscovered_tools: bool
    workspace: Path
    user_id: int
    agent_name: str
    sandbox_network: bool
    may_run_unsandboxed: bool
    refusal: dict[str, str] | None = None  # the turn does not start: its `result` error (model, budget)


@dataclass(frozen=True)
class AgentConfig:
    """What a turn needs of its agent's site configuration (cached: it rarely changes)."""

    found: bool
    system_prompt: str
    choice: ModelChoice
    tools: list[Tool]
    specs: list[dict[str, Any]]  # the tools' OpenAI specs, built once per configuration
    disabled_tools: frozenset[str]
    undiscovered_tools: bool
    sandbox_network: bool
    models: frozenset[str]  # the models a message may ask for ("*": any)


# Site configuration is read for every turn but changes rarely: keep it for a short while. A change made
# in this process clears it at once (chat/apps.py connects the signals); other processes see it within
# CONFIG_TTL_SECONDS.
CONFIG_TTL_SECONDS = 2.0


class TurnSetupCache:
    """What turns read again and again, bounded: agents' configurations (a few seconds) and sessions'
    owners (never change). The one piece of process-wide state of the runtime; `clear()` empties it."""

    AGENTS_KEPT = 1_000
    SESSIONS_KEPT = 100_000

    def __init__(self) -> None:
        self._agents: OrderedDict[str, tuple[float, AgentConfig]] = OrderedDict()
        self._owners: OrderedDict[str, tuple[str, int]] = OrderedDict()

    def agent(self, agent_name: str) -> AgentConfig:
        cached = self._agents.get(agent_name)
        now = time.monotonic()
        if cached is not None and now - cached[0] < CONFIG_TTL_SECONDS:
            return cached[1]
        config = _read_agent_config(agent_name)
        _remember(self._agents, agent_name, (now, config), self.AGENTS_KEPT)
        return config

    def owner(self, session_id: str) -> tuple[str, int]:
        """The session's agent name and user id."""
        owner = self._owners.get(session_id)
        if owner is None:
            owner = Session.objects.values_list("agent_name", "user_id").get(id=session_id)
            _remember(self._owners, session_id, owner, self.SESSIONS_KEPT)
        return owner

    def clear(self, **_: Any) -> None:
        """Forget the agents' configurations (a signal handler: a configuration row changed)."""
        self._agents.clear()

    def reset(self) -> None:
        self._agents.clear()
        self._owners.clear()


def _remember(cache: OrderedDict[str, Any], key: str, value: Any, kept: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > kept:
        cache.popitem(last=False)


setup_cache = TurnSetupCache()


def agent_config(agent_name: str) -> AgentConfig:
    return setup_cache.agent(agent_name)


def _read_agent_config(agent_name: str) -> AgentConfig:
    agent = agent_get(name=agent_name)
    tools = agent_tools(agent_name) if agent else AgentTools([], frozenset(), False)
    choice = model_choice_for(agent=agent)
    config = AgentConfig(
        found=agent is not None,
        system_prompt=agent.system_prompt if agent else "",
        choice=choice,
        tools=tools.enabled,
        specs=[tool.openai_spec() for tool in tools.enabled],
        disabled_tools=tools.disabled,
        undiscovered_tools=tools.undiscovered,
        sandbox_network=bool(agent and agent.sandbox_network),
        models=frozenset(models_allowed(agent=agent, choice=choice)),
    )
    return config


def model_refusal(session_id: str, model: str | None) -> dict[str, str] | None:
    """The `model_not_allowed` error when the session's agent may not use `model` (staff list the models
    an agent may use besides its own: Agent.allowed_models), else None."""
    if not model:
        return None
    agent_name, _ = setup_cache.owner(session_id)
    allowed = setup_cache.agent(agent_name).models
    if model in allowed or "*" in allowed:
        return None
    names = ", ".join(sorted(name for name in allowed if name)) or "its default model"
    return {
        "code": "model_not_allowed",
        "message": f"The agent '{agent_name}' may not use the model '{model}'; it may use: {names}.",
    }


def account_refusal(user_id: int) -> dict[str, str] | None:
    """The `unauthorized` error of a turn whose user was deactivated (or deleted) meanwhile, else None: their
    queued messages and cron jobs do not run (docs/protocol.md §6.2)."""
    user = select_row(get_user_model(), id=user_id)
    if user is not None and user.is_active:
        return None
    return {"code": "unauthorized", "message": USER_ENDED}


def turn_setup(session_id: str, request: ChatRequest) -> TurnSetup:
    agent_name, user_id = setup_cache.owner(session_id)
    config = setup_cache.agent(agent_name)
    choice = config.choice
    # The model was checked when the message was accepted (chat/services.py message_submit); it is checked
    # again here, the one check a turn makes, because what was allowed then may not be now: a message can
    # wait in the queue for hours (paused, its user's slots taken) while staff change the agent's models,
    # and a message stored before a restart or a takeover is run without passing message_submit again.
    refusal = account_refusal(user_id) or model_refusal(session_id, request.model) or budget_refusal(user_id)
    if request.model and refusal is None:
        choice = dataclasses.replace(choice, model=request.model)
    return TurnSetup(
        refusal=refusal,
        choice=choice,
        system_prompt=config.system_prompt,
        history=history_for_model(session_id, before_message_id=request.message_id),
        tools=config.tools,
        specs=config.specs,
        disabled_tools=config.disabled_tools,
        undiscovered_tools=config.undiscovered_tools,
        workspace=workspace_dir(user_id=user_id, session_id=session_id),
        user_id=user_id,
        agent_name=agent_name,
        sandbox_network=config.sandbox_network,
        # Only asked where it matters: without a sandbox, commands run for holders of the permission.
        may_run_unsandboxed=get_sandbox().mode == "none" and may_run_unsandboxed(user_id),
    )


class DjangoRuntime:
    """The controller's Runtime: one AgentTurn per user message."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str, str], OpenAIModelClient] = {}

    def _client(self, choice: ModelChoice) -> OpenAIModelClient | DemoModelClient:
        if choice.is_demo:
            return DemoModelClient(delay=settings.AGENTSITE_DEMO_DELAY)
        key = (choice.base_url, choice.api_key, choice.provider_name)
        client = self._clients.get(key)
        if client is None:
            client = OpenAIModelClient(
                base_url=choice.base_url, api_key=choice.api_key, provider_name=choice.provider_name
            )
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        """Close the cached provider clients (their HTTP connection pools)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    def stream(
        self, request: ChatRequest, *, session_id: str, token: int | None = None
    ) -> Coroutine[Any, Any, AgentTurn | RefusedTurn]:
        """The turn's one entry (agents/contract.py Runtime): its setup is read from now on, so that it
        reaches the database thread together with the write of the message that starts the turn (one
        hand-over instead of two before the first words of the answer); awaiting the result opens it."""
        setup = database_call(turn_setup, session_id, request)
        setup.add_done_callback(_retrieve)  # a turn cancelled before it opened never awaits it
        return self._open(setup, request, session_id, token)

    async def _open(
        self, reading: asyncio.Future[TurnSetup], request: ChatRequest, session_id: str, token: int | None
    ) -> AgentTurn | RefusedTurn:
        setup = await reading
        if setup.refusal is not None:
            return RefusedTurn(setup.refusal)
        if setup.undiscovered_tools:
            # Some of the agent's tools (an MCP server's) were never listed: list them now, then read the
            # agent's tools again (what was found is stored, which clears the cache: agents/signals.py).
            # Once listed, they are cached for every turn and every process.
            await registry.discover(setup.agent_name, _tool_context(setup, session_id))
            setup = await database_sync_to_async(turn_setup)(session_id, request)
        return AgentTurn(
            client=self._client(setup.choice),
            model=setup.choice.model,
            provider_name=setup.choice.provider_name,
            system_prompt=setup.system_prompt,
            history=setup.history,
            request=request,
            tools=setup.tools,
            specs=setup.specs,
            disabled_tools=setup.disabled_tools,
            tool_context=_tool_context(setup, session_id),
            max_steps=settings.AGENTSITE_MAX_TOOL_STEPS,
            # A cron run sets its own (its job's timeout, ChatRequest.confirmation_timeout); clients cannot.
            confirmation_timeout=(
                request.confirmation_timeout
                if request.confirmation_timeout is not None
                else settings.AGENTSITE_CONFIRMATION_TIMEOUT
            ),
            recorder=DjangoTurnRecorder(
                session_id, request.message_id, setup.choice.model, setup.user_id, token=token
            ),
            budget=DailyBudget(setup.user_id) if settings.AGENTSITE_USER_DAILY_TOKENS else None,
        )


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a setup read's exception as retrieved (asyncio logs one nobody asked for)."""
    if not future.cancelled():
        future.exception()


class DailyBudget:
    """A turn's Budget (agents/contract.py): the user's daily tokens, one query before each model call after
    the first (chat/usage.py `budget_refusal`, the rule turn_setup checks before the turn starts)."""

    def __init__(self, user_id: int) -> None:
        self.user_id = user_id

    async def __call__(self) -> dict[str, str] | None:
        return await database_call(budget_refusal, self.user_id)


def _tool_context(setup: TurnSetup, session_id: str) -> ToolContext:
    return ToolContext(
        workspace=setup.workspace,
        session_id=session_id,
        sandbox=get_sandbox(),
        user_id=setup.user_id,
        agent_name=setup.agent_name,
        sandbox_network=setup.sandbox_network,
        may_run_unsandboxed=setup.may_run_unsandboxed,
        audit=TurnAudit(user_id=setup.user_id, session_id=session_id),
        # Read by a call that writes (docs/protocol.md §6.6), in the database thread: never per turn.
        disk_quota=functools.partial(
            database_call,
            workspace_quota,
            user_id=setup.user_id,
            session_id=session_id,
            workspace=setup.workspace,
        ),
    )


class RefusedTurn:
    """A turn that does not start (TurnStream): no event, no model call, and its `result` is the error."""

    def __init__(self, error: dict[str, str]) -> None:
        self.error = error

    def steer(self, text: str) -> None:
        raise StreamClosed("the turn did not start")

    def consume_inputs(self) -> list[str]:
        return []

    def take_pending(self) -> list[str]:
        return []

    def __aiter__(self) -> AsyncIterator[TurnEvent]:
        return self._nothing()

    async def _nothing(self) -> AsyncIterator[TurnEvent]:
        return
        yield

    async def result(self) -> TurnResult:
        return TurnResult(status="error", stop_reason="error", error=dict(self.error))

    async def aclose(self) -> None:
        return None

    def resolve_confirmation(self, confirmation_id: str, approved: bool, option_id: str | None) -> None:
        raise InputError("not_found", f"Confirmation {confirmation_id} not found.")
