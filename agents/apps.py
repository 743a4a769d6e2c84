from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents, providers and tools"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from agents.models import Agent, Provider, SiteDefault, ToolSetting
        from agents.runtime import clear_config_cache

        for model in (Agent, Provider, SiteDefault, ToolSetting):
            post_save.connect(clear_config_cache, sender=model, dispatch_uid=f"agent-config-{model.__name__}")
            post_delete.connect(
                clear_config_cache, sender=model, dispatch_uid=f"agent-config-del-{model.__name__}"
            )
