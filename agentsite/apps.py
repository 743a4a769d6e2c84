from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    name = "agentsite"
    verbose_name = "Accounts and API keys"

    def ready(self) -> None:
        from agentsite import signals

        signals.connect()
