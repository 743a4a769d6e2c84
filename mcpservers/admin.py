"""Django admin for MCP servers: the tool server form and page (agents/toolservers/admin.py, env and header
values write-only, shown masked) with the server's own fields."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from agents.toolservers.admin import ToolServerAdmin, ToolServerForm, form_fields
from mcpservers.endpoints import mcp_policy
from mcpservers.models import McpServer
from mcpservers.services import CONNECTION_FIELDS, server_forget_tools
from security.secret_fields import MASK_HELP


class McpServerForm(ToolServerForm):
    headers = forms.JSONField(
        required=False,
        help_text=f"JSON object of strings (http). {MASK_HELP}",
    )

    class Meta:
        model = McpServer
        fields = form_fields(
            how=("transport",),
            then=("url", "headers", "trusted_tools", "trusted", "timeout_seconds", "sandbox_paths"),
        )

    def clean_headers(self) -> dict[str, str]:
        return self._secrets("headers")

    def clean_trusted_tools(self) -> list[str]:
        return self._strings("trusted_tools")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        transport = data.get("transport")
        if transport == "stdio":
            self.require_command(data, "stdio server")
        if transport == "http":
            url = (data.get("url") or "").strip()
            if data.get("enabled") and not url:
                self.add_error("url", "An enabled http server needs a url.")
            elif url and (reason := mcp_policy(label="The URL").url_refusal(url)) is not None:
                self.add_error("url", reason)
        return data


@admin.register(McpServer)
class McpServerAdmin(ToolServerAdmin):
    form = McpServerForm
    list_display = ["name", "agent", "enabled", "transport", "command", "url", "status", "checked_at"]
    list_filter = ["enabled", "transport", "status", "agent"]
    search_fields = [*ToolServerAdmin.search_fields, "url"]
    readonly_fields = ["status", "status_message", "checked_at", "tools_listed_at"]

    def save_model(self, request: Any, obj: McpServer, form: Any, change: bool) -> None:
        if not change or set(form.changed_data) & set(CONNECTION_FIELDS):
            server_forget_tools(server=obj)  # another program now, perhaps: its tools are listed anew
        super().save_model(request, obj, form, change)
