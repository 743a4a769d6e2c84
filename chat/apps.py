from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat sessions"

    def ready(self) -> None:
        """A change of site configuration (agents, providers, tools, MCP servers) reaches the next turn at
        once."""
        from django.db.models.signals import post_delete, post_save

        from agents.models import Agent, Provider, SiteDefault, ToolSetting
        from agents.signals import tool_config_changed
        from chat.runtime import setup_cache

        tool_config_changed.connect(setup_cache.clear, dispatch_uid="agent-config-tools")
        for model in (Agent, Provider, SiteDefault, ToolSetting):
            post_save.connect(setup_cache.clear, sender=model, dispatch_uid=f"agent-config-{model.__name__}")
            post_delete.connect(
                setup_cache.clear, sender=model, dispatch_uid=f"agent-config-del-{model.__name__}"
            )
