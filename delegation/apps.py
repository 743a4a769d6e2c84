from __future__ import annotations

from django.apps import AppConfig


class DelegationConfig(AppConfig):
    name = "delegation"
    label = "acp"  # the app is about ACP runners; the package name avoids clashing with the SDK's `acp`
    verbose_name = "External agents (ACP)"

    def ready(self) -> None:
        """Offer `delegate_external_agent` to agents (DESIGN: acp registers its tool into agents' tools)."""
        from django.conf import settings

        from agents.tools import registry
        from delegation import process
        from delegation.tool import TOOL_NAME, DelegateExternalAgentTool

        process.RECORD_DIR = settings.DATA_DIR / "runners"

        if registry.get(TOOL_NAME) is None:
            registry.register(DelegateExternalAgentTool())
