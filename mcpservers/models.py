"""MCP server configurations per agent, and what was last found out about each server.

Configured like ACP runners (docs/protocol.md §2 "MCP servers"): `env` and `headers` values are secrets,
stored encrypted and write-only everywhere (§6.3). Beside the configuration a row keeps the server's tool
list as last discovered (the cache every process offers to the model) and its status for the settings page.
JSON columns are read through `McpServerConfig` / `CachedTool` (pydantic), so a row edited by hand into the
wrong shape fails with the server's name instead of starting nonsense.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

import pydantic
from django.db import models

from agents.toolservers.models import ToolServer, ToolServerConfig
from agentsite.isotime import iso
from security.encryption import unreadable_message
from security.secret_fields import EncryptedJSONDictField

DEFAULT_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 3_600
TRANSPORTS = ("stdio", "http")
Transport = Literal["stdio", "http"]
Status = Literal["unchecked", "ok", "error"]


class CachedTool(pydantic.BaseModel):
    """One tool of a server as last listed: what the model is offered without starting the server."""

    model_config = pydantic.ConfigDict(extra="ignore", frozen=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any] = {}
    read_only: bool = False  # the server annotated it readOnlyHint


class McpServerConfig(ToolServerConfig):
    """A server row's settings in typed form: how to reach it and how far its tools are trusted."""

    transport: Transport
    url: str
    headers: dict[str, str]
    trusted_tools: list[str]
    # Secrets no configured key decrypts (security/encryption.py), as "env NAME" / "header NAME": they
    # are left out, and the server does not start until a staff user sets them again.
    unreadable: list[str] = []

    def unreadable_error(self) -> str | None:
        if not self.unreadable:
            return None
        return unreadable_message(f"the {', '.join(self.unreadable)} value of MCP server '{self.name}'")

    def risk_of(self, tool: CachedTool) -> Literal["safe", "dangerous"]:
        """docs/protocol.md §2: dangerous unless listed in `trusted_tools`, or annotated read-only by a
        server that staff marked `trusted` (a server's own word counts only when it is trusted)."""
        if tool.name in self.trusted_tools or (self.trusted and tool.read_only):
            return "safe"
        return "dangerous"


class McpStatusDict(TypedDict):
    state: Status
    message: str | None
    checked_at: str | None
    tools: list[dict[str, str]]


class McpServerDict(TypedDict):
    """The wire form of one server (MCP in docs/protocol.md §2); secret values masked, status read-only."""

    enabled: bool
    transport: str
    command: str | None
    args: list[str]
    env: dict[str, str]
    url: str | None
    headers: dict[str, str]
    trusted_tools: list[str]
    trusted: bool
    timeout_seconds: int
    sandbox_paths: list[str]
    status: McpStatusDict


class McpServer(ToolServer):
    """One Model Context Protocol server whose tools an agent may use; the common fields (name, enabled,
    command, args, env, sandbox_paths) are `ToolServer`'s (agents/toolservers/)."""

    secret_fields = ("env", "headers")

    agent = ToolServer.agent_field("mcp_servers")
    transport = models.CharField(max_length=8, choices=[(t, t) for t in TRANSPORTS], default="stdio")
    command = models.CharField(max_length=1000, blank=True, help_text="stdio: the program to start.")
    url = models.CharField(max_length=2000, blank=True, help_text="http: the streamable HTTP endpoint.")
    headers = EncryptedJSONDictField(default=dict, blank=True)  # values encrypted
    trusted_tools = models.JSONField(
        default=list, blank=True, help_text="Tools of this server that run without asking (risk safe)."
    )
    trusted = models.BooleanField(
        default=False, help_text="Tools the server itself annotates as read-only run without asking too."
    )
    timeout_seconds = ToolServer.timeout_field(DEFAULT_TIMEOUT_SECONDS)
    sandbox_paths = models.JSONField(
        default=list,
        blank=True,
        help_text="stdio: more host paths the program needs, shown read-only in its sandbox (its executable "
        "and installation are shown automatically). Never the data directory or the code.",
    )
    # What was last found out about the server (discovery, the test button, failing calls).
    tools = models.JSONField(default=list, blank=True, editable=False)
    tools_listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    status = models.CharField(max_length=16, default="unchecked", editable=False)
    status_message = models.TextField(blank=True, editable=False)
    checked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta(ToolServer.Meta):
        verbose_name = "MCP server"
        constraints = [
            *ToolServer.table_constraints("mcp_server"),
            models.CheckConstraint(condition=models.Q(transport__in=TRANSPORTS), name="mcp_server_transport"),
            models.CheckConstraint(
                condition=models.Q(enabled=False)
                | (models.Q(transport="stdio") & ~models.Q(command=""))
                | (models.Q(transport="http") & ~models.Q(url="")),
                name="mcp_server_enabled_is_reachable",
            ),
        ]

    def config(self) -> McpServerConfig:
        """The row as a validated McpServerConfig (raises pydantic.ValidationError on a malformed row)."""
        env, bad_env = self.readable("env")
        headers, bad_headers = self.readable("headers")
        return McpServerConfig.model_validate(
            {
                "name": self.name,
                "enabled": self.enabled,
                "transport": self.transport,
                "command": self.command,
                "args": self.args,
                "env": env,
                "url": self.url,
                "headers": headers,
                "trusted_tools": self.trusted_tools,
                "trusted": self.trusted,
                "timeout_seconds": self.timeout_seconds,
                "sandbox_paths": self.sandbox_paths,
                "unreadable": [f"env {k}" for k in bad_env] + [f"header {k}" for k in bad_headers],
            }
        )

    def cached_tools(self) -> list[CachedTool]:
        """The tools as last discovered; an entry that is not a tool is skipped."""
        found = []
        for item in self.tools if isinstance(self.tools, list) else []:
            try:
                found.append(CachedTool.model_validate(item))
            except pydantic.ValidationError:
                continue
        return found

    def to_dict(self) -> McpServerDict:
        return {
            "enabled": self.enabled,
            "transport": self.transport,
            "command": self.command or None,
            "args": list(self.args),
            "env": self.masked("env"),
            "url": self.url or None,
            "headers": self.masked("headers"),
            "trusted_tools": list(self.trusted_tools),
            "trusted": self.trusted,
            "timeout_seconds": self.timeout_seconds,
            "sandbox_paths": list(self.sandbox_paths),
            "status": self.status_dict(),
        }

    def status_dict(self) -> McpStatusDict:
        return {
            "state": self.status if self.status in ("ok", "error") else "unchecked",  # type: ignore[typeddict-item]
            "message": self.status_message or None,
            "checked_at": iso(self.checked_at) if self.checked_at else None,
            "tools": [{"name": tool.name, "description": tool.description} for tool in self.cached_tools()],
        }
