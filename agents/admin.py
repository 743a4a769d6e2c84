from __future__ import annotations

from django import forms
from django.contrib import admin

from agents.models import Agent, Provider, SiteDefault, ToolSetting


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
    list_display = ["name", "provider", "model", "updated_at"]
    search_fields = ["name", "description"]
    list_filter = ["provider"]
    inlines = [ToolSettingInline]


@admin.register(SiteDefault)
class SiteDefaultAdmin(admin.ModelAdmin):
    list_display = ["provider", "model"]


@admin.register(ToolSetting)
class ToolSettingAdmin(admin.ModelAdmin):
    list_display = ["agent", "tool", "enabled", "updated_at"]
    list_filter = ["enabled", "tool"]
    search_fields = ["agent__name", "tool"]
