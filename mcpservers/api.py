"""REST for MCP servers per agent (docs/protocol.md §2 "MCP servers").

Site configuration: readable by every user (secret values masked), writable by staff, who also call `test`.
"""

from __future__ import annotations

from typing import cast

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import request_user
from agents.api import STAFF_ONLY
from agents.toolservers.api import (
    ToolServerApi,
    ToolServerDetailApi,
    ToolServerListApi,
    detail_schema,
    list_schema,
    not_found,
)
from agentsite.openapi import errors
from mcpservers.models import McpServer
from mcpservers.serializers import (
    McpServerInputSerializer,
    McpServerListSerializer,
    McpServerSerializer,
    McpTestSerializer,
)
from mcpservers.services import servers


class _ServerApi(ToolServerApi):
    store = servers
    kind = "server"
    label = "MCP server"
    input_serializer = McpServerInputSerializer


@extend_schema_view(**list_schema("agents_mcp", McpServerListSerializer))
class AgentMcpServerListApi(_ServerApi, ToolServerListApi):
    pass


@extend_schema_view(
    **detail_schema(
        "agents_mcp",
        noun="server",
        what="MCP server",
        answer=McpServerSerializer,
        request=McpServerInputSerializer,
        example=(
            "The time server from PyPI",
            {"enabled": True, "transport": "stdio", "command": "mcp-server-time", "timeout_seconds": 30},
        ),
    )
)
class AgentMcpServerApi(_ServerApi, ToolServerDetailApi):
    pass


class AgentMcpServerTestApi(_ServerApi):
    """Start the server apart from any chat, list its tools, stop it: `{ok, tools, error?}`. The list is
    cached as the server's tools (the "refresh"), a failure shown in its status."""

    @extend_schema(
        operation_id="agents_mcp_test",
        request=None,
        responses={200: McpTestSerializer, **not_found("MCP server"), **errors({403: STAFF_ONLY})},
    )
    def post(self, request: Request, name: str, server: str) -> Response:
        agent = self._agent(name)
        from mcpservers.probe import server_test  # the MCP SDK, on first use (mcpservers/tools.py)

        found = cast(McpServer, self._server(agent, server))
        return Response(server_test(agent=agent, server=found, user=request_user(request)))
