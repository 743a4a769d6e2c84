"""MCP servers' tools in the agents' tool registry (docs/protocol.md §2 "MCP servers").

`McpToolSource` is the registry's source of these tools: for an agent, one `McpTool` per tool of each of
its enabled servers, named `mcp__{server}__{tool}`, with the server's JSON schema and description, taken
from the tool list cached on the server's row (mcpservers/models.py) — so listing them starts nothing.
A server whose tools were never listed is discovered before its agent's next turn, through that chat
session's connection. Each tool goes through the same switches, approvals, timeouts and output caps as a
built-in one: it is a `Tool` like them. Every failure is a ToolError naming the server; the turn goes on.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic
from django.conf import settings

from agents.sandbox import SandboxRefused
from agents.tools.base import Risk, SourcedTools, Tool, ToolContext, ToolError, ToolSource
from agents.toolservers.launch import launch_fields
from agentsite.db import database_sync_to_async
from mcpservers.endpoints import mcp_policy
from mcpservers.models import CachedTool, McpServerConfig
from mcpservers.services import (
    needs_discovery,
    server_config,
    server_configs_for_agent,
    server_record_failure,
    server_record_tools,
)

if TYPE_CHECKING:
    import mcp_types as types

    from mcpservers.client import McpConnection, McpServerSpec
    from mcpservers.sessions import McpSessionRegistry

# The MCP SDK (mcpservers/client.py, sessions.py, results.py) and jsonschema are imported when a server is
# first used, not when Django starts: with what it brings (anyio, starlette, uvicorn, opentelemetry, ...)
# the SDK costs ~27 MB in every server process, most of which never reach an MCP server.

logger = logging.getLogger(__name__)

PREFIX = "mcp__"
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what every model API takes as a function name
MAX_DESCRIPTION_CHARS = 4000


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


class McpArguments(pydantic.BaseModel):
    """A call's arguments as the model sent them; checked against the server's schema in `validate`."""

    model_config = pydantic.ConfigDict(extra="forbid")
    arguments: dict[str, Any]


class McpTool(Tool):
    """One tool of one MCP server, as the model sees it."""

    Params = McpArguments
    default_enabled = True  # on while its server is enabled, until switched off

    def __init__(self, *, source: McpToolSource, server: str, tool: CachedTool, risk: Risk) -> None:
        self.name = tool_name(server, tool.name)
        self.description = (tool.description or f"Tool '{tool.name}' of the MCP server '{server}'.")[
            :MAX_DESCRIPTION_CHARS
        ]
        self.risk = risk
        self.server = server
        self.tool = tool.name
        self._schema = _object_schema(tool.input_schema)
        self._source = source

    def parameters(self) -> dict[str, Any]:
        return copy.deepcopy(self._schema)

    def validate(self, arguments: dict[str, Any]) -> pydantic.BaseModel:
        """The arguments against the server's schema, so the model hears of a mistake at once; a schema
        that is itself broken is left to the server to judge."""
        import jsonschema  # with the SDK, on first use (above)

        try:
            errors = sorted(
                jsonschema.Draft202012Validator(self._schema).iter_errors(arguments), key=lambda e: e.path
            )
        except jsonschema.SchemaError:
            errors = []
        if errors:
            described = "; ".join(
                f"{'.'.join(str(p) for p in error.path) or 'arguments'}: {error.message}"
                for error in errors[:5]
            )
            raise ToolError(f"Invalid arguments for tool '{self.name}': {described}.")
        return McpArguments(arguments=arguments)

    def describe(self, params: pydantic.BaseModel) -> str | None:
        return f"call '{self.tool}' of the MCP server '{self.server}'"

    async def run(self, params: pydantic.BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, McpArguments)
        return await self._source.call(self, params.arguments, ctx)


class McpToolSource(ToolSource):
    """The tools of every agent's MCP servers, and the live connections their calls use."""

    def __init__(self) -> None:
        self._sessions: McpSessionRegistry | None = None

    @property
    def sessions(self) -> McpSessionRegistry:
        if self._sessions is None:
            from mcpservers.sessions import McpSessionRegistry

            self._sessions = McpSessionRegistry(idle_seconds=settings.AGENTSITE_MCP_IDLE_SECONDS)
        return self._sessions

    # -- ToolSource --------------------------------------------------------------------------------

    def tools_for(self, agent_name: str) -> SourcedTools:
        tools: list[Tool] = []
        undiscovered = False
        for server, config in server_configs_for_agent(agent_name=agent_name):
            undiscovered = undiscovered or needs_discovery(server)
            tools += [
                McpTool(source=self, server=config.name, tool=cached, risk=config.risk_of(cached))
                for cached in server.cached_tools()
            ]
        return SourcedTools(tools=tools, undiscovered=undiscovered)

    async def discover(self, agent_name: str, ctx: ToolContext) -> None:
        """List the tools of the agent's servers that were never listed, through this chat session's
        connections (they stay open for the turn's calls). A failure is shown in the server's status."""
        found = await database_sync_to_async(server_configs_for_agent)(agent_name=agent_name)
        for server, config in found:
            if needs_discovery(server):
                try:
                    await self._connect(config, ctx)
                except ToolError:
                    continue  # recorded in its status (or a refusal that is the user's, not the server's)

    async def close_session(self, session_id: str) -> None:
        if self._sessions is not None:
            await self._sessions.close_chat_session(session_id)

    async def shutdown(self) -> None:
        """Close every connection and forget the registry (it is made again, with the settings of then,
        on next use)."""
        sessions, self._sessions = self._sessions, None
        if sessions is not None:
            await sessions.close_all()

    # -- calls ---------------------------------------------------------------------------------------

    async def call(self, tool: McpTool, arguments: dict[str, Any], ctx: ToolContext) -> str:
        from mcpservers.client import McpError
        from mcpservers.results import result_text

        config = await database_sync_to_async(server_config)(agent_name=ctx.agent_name, name=tool.server)
        if config is None or not config.enabled:
            raise ToolError(f"MCP server '{tool.server}' is no longer enabled for this agent.")
        conn = await self._connect(config, ctx)
        try:
            result = await conn.call_tool(tool.tool, arguments)
        except McpError as exc:
            if exc.code != "rejected":
                await self._record_failure(ctx.agent_name, config.name, exc.message)
            raise ToolError(exc.message) from None
        return await result_text(result, server=config.name, tool=tool.tool, ctx=ctx)

    async def _connect(self, config: McpServerConfig, ctx: ToolContext) -> McpConnection:
        """This chat session's connection to the server, started if needed; its tools recorded when it
        starts. ToolError (recorded in the server's status unless it is this user's refusal) on failure."""
        from mcpservers.client import McpError

        if (unreadable := config.unreadable_error()) is not None:
            raise ToolError(unreadable)
        # A stdio server is a process started for the chat: its start is audited as a runner's.
        audit = partial(ctx.audit_start, "mcp", config) if config.transport == "stdio" else None
        try:
            spec = self.spec(config, ctx)
        except SandboxRefused as exc:  # its program is not there, or may not be shown: the config's fault
            message = f"MCP server '{config.name}' could not be started: {exc}"
            await self._record_failure(ctx.agent_name, config.name, message)
            if audit is not None:
                await audit("failed", message)
            raise ToolError(message) from None
        on_change = partial(self._record_tools, ctx.agent_name, config.name)
        try:
            conn, started = await self.sessions.connect(ctx.session_id, spec, on_tools_changed=on_change)
        except McpError as exc:
            if exc.code != "refused":
                await self._record_failure(ctx.agent_name, config.name, exc.message)
            if audit is not None:
                await audit("failed", exc.message)
            raise ToolError(exc.message) from None
        except asyncio.CancelledError:
            if audit is not None:
                await asyncio.shield(audit("cancelled"))
            raise
        if started:
            if audit is not None:
                await audit("started")
            await self._record_tools(ctx.agent_name, config.name, conn.tools)
        return conn

    def spec(self, config: McpServerConfig, ctx: ToolContext, *, home: Path | None = None) -> McpServerSpec:
        """How to reach the server for this call: stdio in the site's sandbox with the chat session's
        workspace, a persistent HOME per user and server, the agent's network setting and the program's
        paths shown; http through the outbound rule. SandboxRefused when its program cannot be shown."""
        from mcpservers.client import McpServerSpec

        common: dict[str, Any] = {
            "name": config.name,
            "transport": config.transport,
            "timeout_seconds": float(config.timeout_seconds),
            # A first start may download the server (uvx, npx): never less than the site's start bound.
            "start_seconds": float(max(config.timeout_seconds, settings.AGENTSITE_MCP_START_SECONDS)),
        }
        if config.transport == "http":
            return McpServerSpec(**common, url=config.url, headers=dict(config.headers), policy=mcp_policy())
        launch = launch_fields(config, ctx, home_name=f"mcp.{config.name}", home=home)
        return McpServerSpec(**common, **launch, workspace=ctx.workspace)

    async def _record_tools(self, agent_name: str, server: str, tools: list[types.Tool]) -> None:
        cached, skipped = cached_tools(server, tools)
        await database_sync_to_async(server_record_tools)(
            agent_name=agent_name, name=server, tools=cached, skipped=skipped
        )

    async def _record_failure(self, agent_name: str, server: str, message: str) -> None:
        try:
            await database_sync_to_async(server_record_failure)(
                agent_name=agent_name, name=server, message=message
            )
        except Exception:  # the status is for the settings page; the call's own error still reaches the model
            logger.exception("MCP server %s: its failure could not be recorded", server)


def cached_tools(server: str, tools: list[types.Tool]) -> tuple[list[CachedTool], list[str]]:
    """A server's tool list as cached: the tools, and a sentence for each one not offered to the model."""
    cached, skipped = [], []
    for tool in tools:
        name = tool_name(server, tool.name)
        if not TOOL_NAME.fullmatch(name):
            skipped.append(f"'{tool.name}' (its name {name} is not 1-64 letters, digits, '_' or '-')")
            continue
        annotations = tool.annotations
        cached.append(
            CachedTool(
                name=tool.name,
                description=tool.description or "",
                input_schema=dict(tool.input_schema or {}),
                read_only=bool(annotations is not None and annotations.read_only_hint),
            )
        )
    return cached, skipped


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema as a function's `parameters`: always an object with properties."""
    shown = {key: value for key, value in copy.deepcopy(schema).items() if key not in ("title", "$schema")}
    shown["type"] = "object"
    shown.setdefault("properties", {})
    return shown


# The one source of MCP tools of this process (registered into agents' registry by mcpservers/apps.py).
source = McpToolSource()
