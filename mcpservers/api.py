"""REST for MCP servers per agent (docs/protocol.md §2 "MCP servers").

Site configuration: readable by every user (secret values masked), writable by staff, who also call `test`.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import request_user
from agents.api import AGENT_NOT_FOUND, STAFF_ONLY, AgentConfigApi
from agents.models import Agent
from agentsite.errors import ApiError
from agentsite.openapi import errors
from agentsite.validation import invalid
from mcpservers.models import McpServer
from mcpservers.serializers import (
    McpServerInputSerializer,
    McpServerListSerializer,
    McpServerSerializer,
    McpTestSerializer,
)
from mcpservers.services import SecretKeepError, server_delete, server_get, server_list, server_upsert

SERVER_NOT_FOUND = errors({404: "not_found: no such agent, or no such MCP server of it"})


class AgentMcpServerListApi(AgentConfigApi):
    @extend_schema(
        operation_id="agents_mcp_list", responses={200: McpServerListSerializer, **AGENT_NOT_FOUND}
    )
    def get(self, request: Request, name: str) -> Response:
        return Response({"servers": server_list(agent=self._agent(name))})


class _ServerApi(AgentConfigApi):
    def _server(self, agent: Agent, server: str) -> McpServer:
        found = server_get(agent=agent, name=server)
        if found is None:
            raise ApiError(404, "not_found", f"MCP server {server} not found for agent {agent.name}.")
        return found


class AgentMcpServerApi(_ServerApi):
    @extend_schema(
        operation_id="agents_mcp_retrieve", responses={200: McpServerSerializer, **SERVER_NOT_FOUND}
    )
    def get(self, request: Request, name: str, server: str) -> Response:
        return Response(self._server(self._agent(name), server).to_dict())

    @extend_schema(
        operation_id="agents_mcp_put",
        examples=[
            OpenApiExample(
                "The time server from PyPI",
                {"enabled": True, "transport": "stdio", "command": "mcp-server-time", "timeout_seconds": 30},
                request_only=True,
            )
        ],
        description="Creates or replaces the server; a server name is 1-64 of `[A-Za-z0-9_-]`.",
        request=McpServerInputSerializer,
        responses={
            200: McpServerSerializer,
            **AGENT_NOT_FOUND,
            **errors({400: "invalid: `fields` names each problem", 403: STAFF_ONLY}),
        },
    )
    def put(self, request: Request, name: str, server: str) -> Response:
        agent = self._agent(name)
        self._named("server", server)
        data = McpServerInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            stored = server_upsert(agent=agent, name=server, data=data.validated_data)
        except SecretKeepError as exc:
            raise invalid({exc.field: [str(exc)]}) from None
        return Response(stored.to_dict())

    @extend_schema(
        operation_id="agents_mcp_delete",
        responses={204: None, **SERVER_NOT_FOUND, **errors({403: STAFF_ONLY})},
    )
    def delete(self, request: Request, name: str, server: str) -> Response:
        if not server_delete(agent=self._agent(name), name=server):
            raise ApiError(404, "not_found", f"MCP server {server} not found for agent {name}.")
        return Response(status=204)


class AgentMcpServerTestApi(_ServerApi):
    """Start the server apart from any chat, list its tools, stop it: `{ok, tools, error?}`. The list is
    cached as the server's tools (the "refresh"), a failure shown in its status."""

    @extend_schema(
        operation_id="agents_mcp_test",
        request=None,
        responses={200: McpTestSerializer, **SERVER_NOT_FOUND, **errors({403: STAFF_ONLY})},
    )
    def post(self, request: Request, name: str, server: str) -> Response:
        agent = self._agent(name)
        from mcpservers.probe import server_test  # the MCP SDK, on first use (mcpservers/tools.py)

        return Response(
            server_test(agent=agent, server=self._server(agent, server), user=request_user(request))
        )
