"""Django admin for ACP runners; env values stay write-only here too (shown masked)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from acp.models import AcpRunner
from security.encryption import is_unreadable, unreadable_message
from security.secret_fields import MASK_HELP, SECRET_MASK, MaskWithoutValue, unmasked


class AcpRunnerForm(forms.ModelForm):
    env = forms.JSONField(
        required=False,
        help_text=f"JSON object of strings. {MASK_HELP}",
    )

    class Meta:
        model = AcpRunner
        fields = [
            "agent",
            "name",
            "enabled",
            "command",
            "args",
            "env",
            "trusted",
            "tool_parse_mode",
            "timeout_seconds",
            "sandbox_paths",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["env"] = {key: SECRET_MASK for key in self.instance.env}
            unreadable = sorted(k for k, v in self.instance.env.items() if is_unreadable(v))
            if unreadable:
                what = f"the stored value of {', '.join(unreadable)}"
                self.fields["env"].help_text = f"{self.fields['env'].help_text} {unreadable_message(what)}"

    def clean_sandbox_paths(self) -> list[str]:
        from agents.sandbox.site import sandbox_path_refusal

        value = self.cleaned_data.get("sandbox_paths") or []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise forms.ValidationError("A JSON list of absolute paths.")
        errors = [reason for reason in map(sandbox_path_refusal, value) if reason is not None]
        if errors:
            raise forms.ValidationError(errors)
        return value

    def clean_env(self) -> dict[str, str]:
        value = self.cleaned_data.get("env") or {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise forms.ValidationError("env must be a JSON object whose values are strings.")
        try:
            return unmasked(value, self.instance.env if self.instance.pk else {})
        except MaskWithoutValue as exc:
            raise forms.ValidationError(f"{exc.key} has no stored value to keep; give its value.") from None

    def clean_args(self) -> list[str]:
        value = self.cleaned_data.get("args") or []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise forms.ValidationError("args must be a JSON list of strings.")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("enabled") and not (data.get("command") or "").strip():
            self.add_error("command", "An enabled runner needs a command.")
        return data


@admin.register(AcpRunner)
class AcpRunnerAdmin(admin.ModelAdmin):
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
    search_fields = ["name", "command", "agent__name"]
    raw_id_fields = ["agent"]
