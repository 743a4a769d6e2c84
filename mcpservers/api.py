"""REST for MCP servers per agent (docs/protocol.md §2 "MCP servers").

Site configuration: readable by every user (secret values masked), writable by staff, who also call `test`.
"""

from __future__ import annotations

from agents.toolservers.api import ToolServerApi, ToolServerDetailApi, ToolServerListApi, ToolServerTestApi
from mcpservers.serializers import (
    McpServerInputSerializer,
    McpServerListSerializer,
    McpServerSerializer,
    McpTestSerializer,
)
from mcpservers.services import servers


class _ServerApi(ToolServerApi):
    store, input_serializer = servers, McpServerInputSerializer
    operation = "agents_mcp"


class AgentMcpServerListApi(_ServerApi, ToolServerListApi):
    answer = McpServerListSerializer


class AgentMcpServerApi(_ServerApi, ToolServerDetailApi):
    answer = McpServerSerializer
    example = (
        "The time server from PyPI",
        {"enabled": True, "transport": "stdio", "command": "mcp-server-time", "timeout_seconds": 30},
    )


class AgentMcpServerTestApi(_ServerApi, ToolServerTestApi):
    """Start the server apart from any chat, list its tools, stop it: `{ok, tools, error?}`. The list is
    cached as the server's tools (the "refresh"), a failure shown in its status."""

    answer, probe = McpTestSerializer, "mcpservers.probe.server_test"
