from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents, providers and tools"

    def ready(self) -> None:
        """Long-lived children of tools (ACP runners, MCP servers) are recorded, so that those of a server
        that was killed are ended when one starts again (agents/sandbox/children.py)."""
        from django.conf import settings

        from agents.sandbox import children

        children.RECORD_DIR = settings.DATA_DIR / "runners"
