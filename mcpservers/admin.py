"""Django admin for MCP servers; env and header values stay write-only here too (shown masked)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from mcpservers.endpoints import mcp_policy
from mcpservers.models import McpServer
from mcpservers.services import CONNECTION_FIELDS, SecretKeepError, kept_secrets, server_forget_tools
from security.encryption import is_unreadable, unreadable_message
from security.secret_fields import MASK_HELP, SECRET_MASK

_SECRETS = ("env", "headers")


class McpServerForm(forms.ModelForm):
    env = forms.JSONField(
        required=False,
        help_text=f"JSON object of strings. {MASK_HELP}",
    )
    headers = forms.JSONField(
        required=False,
        help_text=f"JSON object of strings (http). {MASK_HELP}",
    )

    class Meta:
        model = McpServer
        fields = [
            "agent",
            "name",
            "enabled",
            "transport",
            "command",
            "args",
            "env",
            "url",
            "headers",
            "trusted_tools",
            "trusted",
            "timeout_seconds",
            "sandbox_paths",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for name in _SECRETS:
                stored = getattr(self.instance, name)
                self.initial[name] = {key: SECRET_MASK for key in stored}
                unreadable = sorted(k for k, v in stored.items() if is_unreadable(v))
                if unreadable:
                    what = f"the stored value of {', '.join(unreadable)}"
                    self.fields[name].help_text = f"{self.fields[name].help_text} {unreadable_message(what)}"

    def _secrets(self, name: str) -> dict[str, str]:
        value = self.cleaned_data.get(name) or {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise forms.ValidationError(f"{name} must be a JSON object whose values are strings.")
        try:
            return kept_secrets(name, value, getattr(self.instance, name) if self.instance.pk else {})
        except SecretKeepError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_env(self) -> dict[str, str]:
        return self._secrets("env")

    def clean_headers(self) -> dict[str, str]:
        return self._secrets("headers")

    def _strings(self, name: str) -> list[str]:
        value = self.cleaned_data.get(name) or []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise forms.ValidationError(f"{name} must be a JSON list of strings.")
        return value

    def clean_args(self) -> list[str]:
        return self._strings("args")

    def clean_trusted_tools(self) -> list[str]:
        return self._strings("trusted_tools")

    def clean_sandbox_paths(self) -> list[str]:
        from agents.sandbox.site import sandbox_path_refusal

        value = self._strings("sandbox_paths")
        errors = [reason for reason in map(sandbox_path_refusal, value) if reason is not None]
        if errors:
            raise forms.ValidationError(errors)
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        transport = data.get("transport")
        if data.get("enabled") and transport == "stdio" and not (data.get("command") or "").strip():
            self.add_error("command", "An enabled stdio server needs a command.")
        if transport == "http":
            url = (data.get("url") or "").strip()
            if data.get("enabled") and not url:
                self.add_error("url", "An enabled http server needs a url.")
            elif url and (reason := mcp_policy(label="The URL").url_refusal(url)) is not None:
                self.add_error("url", reason)
        return data


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ["name", "agent", "enabled", "transport", "command", "url", "status", "checked_at"]
    list_filter = ["enabled", "transport", "status", "agent"]
    search_fields = ["name", "command", "url", "agent__name"]
    raw_id_fields = ["agent"]
    readonly_fields = ["status", "status_message", "checked_at", "tools_listed_at"]

    def save_model(self, request: Any, obj: McpServer, form: Any, change: bool) -> None:
        if not change or set(form.changed_data) & set(CONNECTION_FIELDS):
            server_forget_tools(server=obj)  # another program now, perhaps: its tools are listed anew
        super().save_model(request, obj, form, change)
