"""Django admin for ACP runners: the tool server form and page (agents/toolservers/admin.py, env values
write-only, shown masked) with the runner's own fields."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from acp.models import AcpRunner
from agents.toolservers.admin import ToolServerAdmin, ToolServerForm, form_fields


class AcpRunnerForm(ToolServerForm):
    noun = "runner"

    class Meta:
        model = AcpRunner
        fields = form_fields(then=("trusted", "tool_parse_mode", "timeout_seconds", "sandbox_paths"))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        self.require_command(data, "runner")
        return data


@admin.register(AcpRunner)
class AcpRunnerAdmin(ToolServerAdmin):
    form = AcpRunnerForm
    list_display = [
        "name",
        "agent",
        "enabled",
        "command",
        "trusted",
        "tool_parse_mode",
        "timeout_seconds",
        "updated_at",
    ]
    list_filter = ["enabled", "trusted", "tool_parse_mode", "agent"]
