"""The admin form and page every tool server's admin builds on; secret values stay write-only here too.

Secret fields (`ToolServer.secret_fields`) show their names with the mask; a value left masked keeps the
stored one (agents/toolservers/services.py), one no configured key opens says so in its help text.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from agents.toolservers.services import SecretKeepError, kept_secrets
from security.encryption import is_unreadable, unreadable_message
from security.secret_fields import MASK_HELP, SECRET_MASK


def form_fields(*, how: tuple[str, ...] = (), then: tuple[str, ...]) -> list[str]:
    """The form's fields: those every tool server has, `how` it is reached before its command, `then` the
    protocol's own."""
    return ["agent", "name", "enabled", *how, "command", "args", "env", *then]


class ToolServerForm(forms.ModelForm):
    noun = "server"  # how messages name one

    env = forms.JSONField(required=False, help_text=f"JSON object of strings. {MASK_HELP}")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for name in self.instance.secret_fields:
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
        stored = getattr(self.instance, name) if self.instance.pk else {}
        try:
            return kept_secrets(name, value, stored, noun=self.noun)
        except SecretKeepError as exc:
            raise forms.ValidationError(str(exc)) from None

    def _strings(self, name: str) -> list[str]:
        value = self.cleaned_data.get(name) or []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise forms.ValidationError(f"{name} must be a JSON list of strings.")
        return value

    def clean_env(self) -> dict[str, str]:
        return self._secrets("env")

    def clean_args(self) -> list[str]:
        return self._strings("args")

    def clean_sandbox_paths(self) -> list[str]:
        from agents.sandbox.site import sandbox_path_refusal

        value = self._strings("sandbox_paths")
        errors = [reason for reason in map(sandbox_path_refusal, value) if reason is not None]
        if errors:
            raise forms.ValidationError(errors)
        return value

    def require_command(self, data: dict[str, Any], what: str) -> None:
        """An enabled server that is started needs a program (`what`: "runner", "stdio server")."""
        if data.get("enabled") and not (data.get("command") or "").strip():
            self.add_error("command", f"An enabled {what} needs a command.")


class ToolServerAdmin(admin.ModelAdmin):
    search_fields = ["name", "command", "agent__name"]
    raw_id_fields = ["agent"]
