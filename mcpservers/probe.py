"""`POST /agents/{name}/config/mcp/{server}/test`: start a server apart from any chat and list its tools.

A stdio server runs as it would in a chat, in a scratch workspace (agents/toolservers/probe.py). What it
answers is cached as the server's tool list, and its status says how it went, for every process
(mcpservers/services.py).
"""

from __future__ import annotations

from typing import Any, TypedDict

from asgiref.sync import async_to_sync

from agents.models import Agent
from agents.sandbox import SandboxRefused
from agents.tools.base import ToolContext
from agents.toolservers.probe import config_problem, probe_context
from mcpservers.client import McpConnection, McpError
from mcpservers.models import McpServer, McpServerConfig
from mcpservers.services import server_record_failure, server_record_tools


class ProbeResult(TypedDict, total=False):
    ok: bool
    tools: list[dict[str, str]]
    error: dict[str, str]


def server_test(*, agent: Agent, server: McpServer, user: Any) -> ProbeResult:
    from mcpservers.tools import cached_tools

    config, problem = config_problem(server, "MCP server")
    if problem is not None:
        return _failed(agent, server.name, *problem)
    with probe_context(agent=agent, user=user, prefix="mcp", audited=False) as context:
        try:
            listed = async_to_sync(_list_tools)(config, context)
        except SandboxRefused as exc:  # its program is not there, or may not be shown
            message = f"MCP server '{server.name}' could not be started: {exc}"
            return _failed(agent, server.name, "spawn_failed", message)
        except McpError as exc:
            return _failed(agent, server.name, exc.code, exc.message, record=exc.code != "refused")
    tools, skipped = cached_tools(config.name, listed)
    server_record_tools(agent_name=agent.name, name=server.name, tools=tools, skipped=skipped)
    return {"ok": True, "tools": [{"name": tool.name, "description": tool.description} for tool in tools]}


async def _list_tools(config: McpServerConfig, context: ToolContext) -> list[Any]:
    from mcpservers.tools import source

    conn = McpConnection(source.spec(config, context, home=context.workspace))
    try:
        return await conn.start()
    finally:
        await conn.close()


def _failed(agent: Agent, name: str, code: str, message: str, *, record: bool = True) -> ProbeResult:
    if record:
        server_record_failure(agent_name=agent.name, name=name, message=message)
    return {"ok": False, "tools": [], "error": {"code": code, "message": message}}
