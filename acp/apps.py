from __future__ import annotations

from pathlib import Path

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class AcpConfig(AppConfig):
    name = "acp"
    verbose_name = "External agents (ACP)"

    def ready(self) -> None:
        """Offer `delegate_external_agent` to agents (acp registers its tool into agents' registry); runners
        are site configuration, in the audit trail (agents/toolservers/services.py; env values masked)."""
        from acp.models import AcpRunner
        from acp.tool import TOOL_NAME, DelegateExternalAgentTool
        from agents.tools import registry
        from agents.toolservers.services import track_writes

        _check_not_shadowed()

        if registry.get(TOOL_NAME) is None:
            registry.register(DelegateExternalAgentTool())
        track_writes(AcpRunner, object_type="acp_runner")


def _check_not_shadowed() -> None:
    """The ACP SDK (`agent-client-protocol`, a test dependency) is also a package named `acp`: where it is
    installed beside us and the project's folder is not first on sys.path, Python would load the SDK as
    this app. Say so at once instead of failing somewhere else."""
    import acp

    if Path(acp.__file__ or "").resolve().parent != Path(__file__).resolve().parent:
        raise ImproperlyConfigured(
            f"'acp' was loaded from {acp.__file__}, not from this project: the ACP SDK shadows the app. "
            "Run the server from the project's folder (manage.py does), or uninstall agent-client-protocol."
        )
