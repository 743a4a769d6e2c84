from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    """Project configuration and the framework kernel. No models of its own since accounts/ and audit/
    took theirs (their tables keep the `agentsite_` names); its migrations stay, the history of both."""

    name = "agentsite"
    verbose_name = "Site"
