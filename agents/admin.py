from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from agents.models import Agent, Provider, SiteDefault, ToolSetting
from agents.sandbox.site import get_sandbox


class ProviderForm(forms.ModelForm):
    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Write-only. Leave empty to keep the stored key.",
    )

    class Meta:
        model = Provider
        fields = ["id", "name", "base_url", "api_key", "model_list", "default_model"]

    def clean_api_key(self) -> str:
        value = self.cleaned_data.get("api_key") or ""
        if not value and self.instance.pk:
            return self.instance.api_key
        return value


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ["id", "name", "base_url", "default_model"]
    search_fields = ["id", "name", "base_url"]


class ToolSettingInline(admin.TabularInline):
    model = ToolSetting
    extra = 0


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "provider", "model", "sandbox_network", "updated_at"]
    search_fields = ["name", "description"]
    list_filter = ["provider", "sandbox_network"]
    inlines = [ToolSettingInline]
    change_list_template = "admin/agents/agent/change_list.html"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The list shows where the agents' commands run (the sandbox chosen at start-up)."""
        context = {**(extra_context or {}), "sandbox": get_sandbox().status()}
        return super().changelist_view(request, extra_context=context)


@admin.register(SiteDefault)
class SiteDefaultAdmin(admin.ModelAdmin):
    list_display = ["provider", "model"]


@admin.register(ToolSetting)
class ToolSettingAdmin(admin.ModelAdmin):
    list_display = ["agent", "tool", "enabled", "updated_at"]
    list_filter = ["enabled", "tool"]
    search_fields = ["agent__name", "tool"]
