from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents, providers and tools"

    def ready(self) -> None:
        """Agents, providers, the site default and tool switches are site configuration: every write of
        them is in the audit trail (audit/tracking.py; the provider's key masked). Long-lived
        children of tools (ACP runners, MCP servers) are recorded, so that those of a server that was
        killed are ended when one starts again (agents/sandbox/children.py)."""
        from django.conf import settings

        from agents.models import Agent, Provider, SiteDefault, ToolSetting
        from agents.sandbox import children
        from audit.tracking import track

        noise = ("created_at", "updated_at")
        track(Agent, object_type="agent", exclude=noise)
        track(Provider, object_type="provider", exclude=noise)
        track(SiteDefault, object_type="site_default")
        track(
            ToolSetting,
            object_type="tool_setting",
            object_id=lambda setting: f"{setting.agent_id}/{setting.tool}",
            exclude=noise,
        )
        children.RECORD_DIR = settings.DATA_DIR / "runners"
