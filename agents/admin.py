from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from agents.endpoints import provider_policy
from agents.models import Agent, Provider, SiteDefault, ToolSetting
from agents.sandbox.site import get_sandbox
from agents.services import site_default_adopt
from security.encryption import is_unreadable, unreadable_message


class ProviderForm(forms.ModelForm):
    """The key is write-only (stored encrypted, docs/protocol.md §6.3): never rendered, empty keeps it."""

    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Write-only. Leave empty to keep the stored key.",
    )

    class Meta:
        model = Provider
        fields = ["id", "name", "base_url", "api_key", "model_list", "default_model"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and is_unreadable(self.instance.api_key):
            what = f"the stored API key of provider '{self.instance.pk}'"
            self.fields["api_key"].help_text = unreadable_message(what)

    def clean_base_url(self) -> str:
        value = self.cleaned_data.get("base_url") or ""
        reason = provider_policy(label="The URL").url_refusal(value) if value else None
        if reason is not None:
            raise forms.ValidationError(reason)
        return value

    def clean_api_key(self) -> str:
        value = self.cleaned_data.get("api_key") or ""
        if not value and self.instance.pk:
            return self.instance.api_key
        return value


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ["id", "name", "base_url", "default_model", "key_state"]
    search_fields = ["id", "name", "base_url"]
    readonly_fields = ["discovered_models"]

    def save_model(self, request: HttpRequest, obj: Provider, form: Any, change: bool) -> None:
        """The first provider becomes the site default, as over REST (agents/services.py)."""
        super().save_model(request, obj, form, change)
        if not change:
            site_default_adopt(provider=obj)

    @admin.display(description="API key")
    def key_state(self, obj: Provider) -> str:
        """A key no configured secrets key opens shows here, instead of failing the whole list."""
        if is_unreadable(obj.api_key):
            return "cannot be decrypted: enter it again"
        return "set" if obj.api_key else "-"


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
