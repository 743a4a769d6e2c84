"""The tool API: what a tool declares, how its arguments are validated, and the registry.

Django-free on purpose: the turn loop, the ACP delegation and the REST layer all read
tools through this module, and tests drive it with pytest alone.

Most tools are registered once (the built-ins, `delegate_external_agent`). Tools that exist per agent
and are found at run time — the tools of an agent's MCP servers — come from a :class:`ToolSource` the
registry asks; an agent's tools are :meth:`ToolRegistry.for_agent`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import pydantic
from pydantic import BaseModel

from agents.contract import ApprovalMode, TurnEvent
from audit.actions import RUNNER_START

if TYPE_CHECKING:
    from agents.sandbox.base import Sandbox
    from agents.tools.quota import DiskQuota

logger = logging.getLogger(__name__)

Risk = Literal["safe", "dangerous"]

# Schema keys that only add noise to what the model reads.
_NOISE_KEYS = frozenset({"title"})


class ToolError(Exception):
    """A failure the model should read and react to.

    Its message is one clear sentence; the turn loop turns it into a tool result with
    ``is_error: true`` instead of ending the turn.
    """


class AuditSink(Protocol):
    """Where a turn writes down what it does for the audit trail (docs/protocol.md §6.4): approval
    decisions, commands run, runners started — in the name of the chat's owner. Injected by the caller
    (the Django side: audit/services.py `TurnAudit`); it never raises."""

    async def __call__(self, action: str, *, summary: str, details: dict[str, Any]) -> None: ...


class StartedProgram(Protocol):
    """A configured program a tool starts for a chat (an ACP runner's, a stdio MCP server's settings)."""

    @property
    def name(self) -> str: ...
    @property
    def command(self) -> str: ...
    @property
    def args(self) -> Sequence[str]: ...
    @property
    def trusted(self) -> bool: ...


@dataclass
class ToolContext:
    """Everything a tool may use about the call's surroundings, injected by the caller.

    `sandbox` starts the processes a tool needs (agents/sandbox/); None: this caller offers none, and
    tools that start processes refuse. `user_id`, `agent_name`, `sandbox_network` and
    `may_run_unsandboxed` (the user holds `agents.run_unsandboxed`) describe whose call it is; `audit`, when
    given, is told of every decision and every process started. `disk_quota`, when given, reads the
    workspace's disk quota (agents/tools/quota.py) for a call that writes; None: no quota.
    """

    workspace: Path
    session_id: str
    approval_mode: ApprovalMode = "ask"
    sandbox: Sandbox | None = None
    user_id: int | None = None
    agent_name: str = ""
    sandbox_network: bool = False
    may_run_unsandboxed: bool = False
    emit: Callable[[TurnEvent], None] | None = None
    request_permission: Callable[..., Awaitable[Any]] | None = None
    audit: AuditSink | None = None
    disk_quota: Callable[[], Awaitable[DiskQuota]] | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    async def audit_start(
        self,
        kind: Literal["acp", "mcp"],
        program: StartedProgram,
        status: Literal["started", "failed", "cancelled"],
        error: str | None = None,
    ) -> None:
        """`runner.start` (docs/protocol.md §6.4): a process started for the chat — an ACP runner or an MCP
        server — with its command line, sandboxed or not, and how its start ended. Its env is not shown:
        the names are configuration, the values secrets."""
        if self.audit is None:
            return
        details: dict[str, Any] = {
            "kind": kind,
            "runner": program.name,
            "agent": self.agent_name,
            "command": program.command,
            "args": list(program.args),
            "sandboxed": self.sandbox is not None and self.sandbox.mode != "none",
            "trusted": program.trusted,
            "status": status,
        }
        if error is not None:
            details["error"] = error
        what = "runner" if kind == "acp" else "MCP server"
        summary = f"{what} '{program.name}' {status}: {program.command}"
        await self.audit(RUNNER_START, summary=summary, details=details)


class ToolParams(BaseModel):
    """Base for argument models: unknown arguments are an error, so typos reach the model."""

    model_config = pydantic.ConfigDict(extra="forbid")


class Tool(ABC):
    """One capability offered to the model.

    Subclasses set the attributes (on the class; a tool made at run time may set them per instance)
    and implement :meth:`run`. Arguments are validated by :meth:`ToolRegistry.parse` before ``run``
    ever sees them.
    """

    name: str
    description: str
    Params: ClassVar[type[BaseModel]]
    risk: Risk = "safe"
    default_enabled: bool = True

    def parameters(self) -> dict[str, Any]:
        """The arguments as a self-contained JSON schema object, as OpenAI function calling wants it.

        Built once per tool class (pydantic's schema generation cost ~13 % of a turn's CPU); a deep
        copy is returned so no caller can change the cached one.
        """
        cached = type(self).__dict__.get("_schema_cache")
        if cached is None:
            cached = json_schema_for(self.Params)
            type(self)._schema_cache = cached  # type: ignore[attr-defined]
        return copy.deepcopy(cached)

    def risk_for(self, params: BaseModel) -> Risk:
        """The risk of this particular call; tools whose actions differ in risk override it."""
        return self.risk

    def describe(self, params: BaseModel) -> str | None:
        """A short summary of the call to show in a confirmation request (None: show arguments)."""
        return None

    def preview(self, params: BaseModel, workspace: Path) -> dict[str, Any] | None:
        """What the call would change, for a user who must approve it (`confirmation_request`'s
        `data.preview`, docs/protocol.md extensions "Approvals"); None: the arguments say it all.
        Blocking file I/O is fine here: :func:`preview_for` runs it in a worker thread."""
        return None

    def refusal_reason(self, params: BaseModel) -> str | None:
        """Why this call is refused in every approval mode, or None when it may run."""
        return None

    # Lifecycle hooks (added for delegate_external_agent, which keeps runner subprocesses per chat
    # session): chat's live sessions call them through ToolRegistry so chat never imports the tool's app.
    async def close_session(self, session_id: str) -> None:
        """Release what this tool holds for a chat session that was closed. Most tools hold nothing."""
        return None

    async def shutdown(self) -> None:
        """Release everything this tool holds: the server is stopping."""
        return None

    def openai_spec(self) -> dict[str, Any]:
        """The entry for the ``tools`` list of a chat-completions request."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            },
        }

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Arguments → params model, or a ToolError naming each bad field and why."""
        try:
            return self.Params.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise ToolError(
                f"Invalid arguments for tool '{self.name}': {_describe_validation_error(exc)}."
            ) from None

    @abstractmethod
    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        """Do the work and return the text the model sees; raise ToolError for expected failures."""


@dataclass(frozen=True)
class SourcedTools:
    """Tools of an agent from one source, and whether some of its tools are not known yet (then
    :meth:`ToolSource.discover` finds them before the agent's next turn)."""

    tools: list[Tool]
    undiscovered: bool = False


class ToolSource(ABC):
    """Tools that exist per agent and are found at run time (an agent's MCP servers' tools)."""

    @abstractmethod
    def tools_for(self, agent_name: str) -> SourcedTools:
        """The agent's tools from this source as known now (blocking: it may read the database)."""

    async def discover(self, agent_name: str, ctx: ToolContext) -> None:
        """Find the tools :meth:`tools_for` said are not known yet; a turn of the agent is about to start
        in the chat session of `ctx`."""
        return None

    async def close_session(self, session_id: str) -> None:
        """Release what this source holds for a chat session that was closed."""
        return None

    async def shutdown(self) -> None:
        """Release everything: the server is stopping."""
        return None


class ToolRegistry:
    """Tools by name, and the sources of per-agent tools. The default instance (``agents.tools.registry``)
    holds the built-ins and ``delegate_external_agent``, and the MCP servers' source."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []

    def register(self, tool: Tool) -> None:
        """Add a tool; two tools with one name would make calls ambiguous, so that is refused."""
        if tool.name in self._tools:
            raise ValueError(f"A tool named {tool.name!r} is already registered.")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        """Every tool, sorted by name so listings and requests are stable."""
        return [self._tools[name] for name in sorted(self._tools)]

    def names(self) -> list[str]:
        return sorted(self._tools)

    def add_source(self, source: ToolSource) -> None:
        """Ask `source` for agents' tools from now on (once: adding it again changes nothing)."""
        if source not in self._sources:
            self._sources.append(source)

    def for_agent(self, agent_name: str) -> SourcedTools:
        """Every tool of an agent, switched on or not: the registered ones and its sources' (blocking), by
        name. A source's tool never hides a registered one of the same name."""
        tools = dict(self._tools)
        undiscovered = False
        for source in self._sources:
            found = source.tools_for(agent_name)
            undiscovered = undiscovered or found.undiscovered
            for tool in found.tools:
                tools.setdefault(tool.name, tool)
        return SourcedTools(tools=[tools[name] for name in sorted(tools)], undiscovered=undiscovered)

    def lookup(self, name: str, *, agent_name: str) -> Tool | None:
        """A tool of the agent by name (blocking when it is not a registered one)."""
        found = self._tools.get(name)
        if found is None and self._sources:
            found = next((tool for tool in self.for_agent(agent_name).tools if tool.name == name), None)
        return found

    async def discover(self, agent_name: str, ctx: ToolContext) -> None:
        """Let every source find the agent's tools it does not know yet (before a turn)."""
        await self._each("discover", [(source, source.discover(agent_name, ctx)) for source in self._sources])

    async def close_session(self, session_id: str) -> None:
        """Tell every tool and source that a chat session was closed; a failure does not stop the others."""
        await self._each("close_session", self._hooks(lambda owner: owner.close_session(session_id)))

    async def shutdown(self) -> None:
        """Tell every tool and source that the server is stopping."""
        await self._each("shutdown", self._hooks(lambda owner: owner.shutdown()))

    def _hooks(
        self, hook: Callable[[Tool | ToolSource], Awaitable[None]]
    ) -> list[tuple[Tool | ToolSource, Awaitable[None]]]:
        owners: list[Tool | ToolSource] = [*self.all(), *self._sources]
        return [(owner, hook(owner)) for owner in owners]

    async def _each(self, hook: str, calls: Sequence[tuple[Tool | ToolSource, Awaitable[None]]]) -> None:
        results = await asyncio.gather(*(call for _, call in calls), return_exceptions=True)
        for (owner, _), result in zip(calls, results, strict=True):
            if isinstance(result, Exception):
                shown = owner.name if isinstance(owner, Tool) else type(owner).__name__
                logger.error("%s failed in %s", shown, hook, exc_info=result)

    def parse(self, name: str, raw_arguments: str | dict[str, Any] | None) -> tuple[Tool, BaseModel]:
        """Resolve a model's tool call into a tool and validated params, or a ToolError the model reads."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self.names()) or "none"
            raise ToolError(f"Unknown tool '{name}'. Available tools: {known}.")
        return tool, tool.validate(_arguments_object(name, raw_arguments))


def _arguments_object(name: str, raw_arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    """Decode the arguments a model sent; an empty string means no arguments (models do send that)."""
    if raw_arguments is None:
        return {}
    if isinstance(raw_arguments, dict):
        return raw_arguments
    if not isinstance(raw_arguments, str):
        raise ToolError(f"Arguments for tool '{name}' must be a JSON object.")
    if not raw_arguments.strip():
        return {}
    try:
        decoded = json.loads(raw_arguments)
    except json.JSONDecodeError as exc:
        raise ToolError(f"Arguments for tool '{name}' are not valid JSON ({exc.msg}).") from None
    if not isinstance(decoded, dict):
        raise ToolError(f"Arguments for tool '{name}' must be a JSON object, not {type(decoded).__name__}.")
    return decoded


def _describe_validation_error(exc: pydantic.ValidationError) -> str:
    """One readable clause per problem: 'command: Field required'."""
    parts = []
    for error in exc.errors(include_url=False, include_context=False):
        where = ".".join(str(loc) for loc in error["loc"]) or "arguments"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown argument"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def json_schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """A flat JSON schema for ``model``: refs inlined, titles dropped, ``X | None`` shown as X.

    Small and weaker models follow plain schemas best, and some OpenAI-compatible servers
    reject ``$defs``.
    """
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    cleaned: dict[str, Any] = _clean(schema, defs)
    cleaned.setdefault("properties", {})
    cleaned.setdefault("required", [])
    cleaned["type"] = "object"
    cleaned["additionalProperties"] = False
    return cleaned


def _clean(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    node = _collapse_optional(node)
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
        return _clean(merged, defs)
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key in _NOISE_KEYS:
            continue
        if key == "properties":
            # Property names are data, not schema keywords: a field called "title" stays.
            cleaned[key] = {prop: _clean(sub, defs) for prop, sub in value.items()}
        else:
            cleaned[key] = _clean(value, defs)
    return cleaned


def _collapse_optional(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` with a null default is just an optional X: show X."""
    options = node.get("anyOf")
    if not isinstance(options, list) or node.get("default", ...) is not None:
        return node
    non_null = [option for option in options if option != {"type": "null"}]
    if len(non_null) != 1 or len(non_null) == len(options):
        return node
    collapsed = {key: value for key, value in node.items() if key not in {"anyOf", "default"}}
    return {**non_null[0], **collapsed}


async def preview_for(tool: Tool, params: BaseModel, workspace: Path) -> dict[str, Any] | None:
    """The tool's preview of a call, in a worker thread; a failing preview only costs the preview."""
    try:
        return await asyncio.to_thread(tool.preview, params, workspace)
    except Exception:
        logger.exception("tool %s: the preview of a call failed", tool.name)
        return None
