"""Writes and reads of MCP server configs and of what was found out about each server.

REST, the admin, the portal and the tool source all come through here.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pydantic
from django.utils import timezone

from agents.toolservers.services import ToolServerStore
from mcpservers.models import CachedTool, McpServer, McpServerConfig

logger = logging.getLogger(__name__)

# What, when changed, makes the cached tool list stale: the server may be another program now.
CONNECTION_FIELDS = ("transport", "command", "args", "env", "url", "headers", "sandbox_paths")
# After a failed discovery, turns try again only after this long (the test button at once).
DISCOVERY_RETRY_SECONDS = 60


def _forget_if_moved(server: McpServer, current: McpServer | None, values: dict[str, Any]) -> None:
    """A change of how the server is reached forgets its cached tools and status: the next turn (or the
    test button) lists them anew."""
    if current is None or any(
        key in values and getattr(current, key) != values[key] for key in CONNECTION_FIELDS
    ):
        server_forget_tools(server=server)


servers: ToolServerStore[McpServer] = ToolServerStore(
    McpServer, noun="server", label="MCP server", before_save=_forget_if_moved
)
server_list = servers.list  # `GET /agents/{name}/config/mcp`: servers by name, secret values masked
server_get = servers.get
server_upsert = servers.upsert
server_delete = servers.delete  # its live connections end with their chat sessions or idle


def server_forget_tools(*, server: McpServer) -> None:
    """Before a change of how the server is reached is saved: its cached tools and status no longer hold,
    the next turn of its agent (or the test button) lists them anew."""
    server.tools = []
    server.tools_listed_at = None
    server.status = "unchecked"
    server.status_message = ""
    server.checked_at = None


def server_configs_for_agent(*, agent_name: str) -> list[tuple[McpServer, McpServerConfig]]:
    """The agent's servers that are enabled and well-formed, with their typed configs (one query)."""
    found = []
    for server in McpServer.objects.filter(agent_id=agent_name, enabled=True):
        try:
            found.append((server, server.config()))
        except pydantic.ValidationError as exc:
            logger.error("MCP server %s is malformed and ignored: %s", server, exc)
    return found


def server_config(*, agent_name: str, name: str) -> McpServerConfig | None:
    """One server's config, read per call (any process may have changed it); None when it is gone."""
    server = McpServer.objects.filter(agent_id=agent_name, name=name).first()
    return server.config() if server is not None else None


def needs_discovery(server: McpServer, *, now: dt.datetime | None = None) -> bool:
    """An enabled server whose tools were never listed since it was configured (and whose last try did not
    fail just now) has its tools discovered before the next turn of its agent."""
    if not server.enabled or server.tools_listed_at is not None:
        return False
    if server.status == "error" and server.checked_at is not None:
        age = (now or timezone.now()) - server.checked_at
        return age.total_seconds() >= DISCOVERY_RETRY_SECONDS
    return True


def server_record_tools(*, agent_name: str, name: str, tools: list[CachedTool], skipped: list[str]) -> None:
    """The server listed its tools: cache them and mark it ok. Writes only what changed (every write makes
    the turns of every agent read their configuration again)."""
    server = McpServer.objects.filter(agent_id=agent_name, name=name).first()
    if server is None:
        return
    listed = [tool.model_dump() for tool in tools]
    message = "Not offered to the model: " + "; ".join(skipped) + "." if skipped else ""
    unchanged = server.tools == listed and server.status == "ok" and server.status_message == message
    if unchanged and server.tools_listed_at is not None:
        return
    now = timezone.now()
    McpServer.objects.filter(pk=server.pk).update(
        tools=listed, tools_listed_at=now, status="ok", status_message=message, checked_at=now
    )
    _changed(server)


def server_record_failure(*, agent_name: str, name: str, message: str) -> None:
    """The server failed (would not start, crashed, hung, broke the protocol): show why in its status."""
    now = timezone.now()
    updated = McpServer.objects.filter(agent_id=agent_name, name=name).update(
        status="error", status_message=message[:2000], checked_at=now
    )
    if updated:
        _changed(McpServer(agent_id=agent_name, name=name))


def _changed(server: McpServer) -> None:
    """`update()` sends no post_save: tell the turns' cache that a tool configuration changed."""
    from agents.signals import tool_config_changed

    tool_config_changed.send(sender=McpServer, instance=server)
