from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    name = "agentsite"
    verbose_name = "Accounts and API keys"

    def ready(self) -> None:
        """The audit trail follows logins and the accounts (agentsite/audit/); apps track their own
        configuration models in their ready()."""
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        from agentsite.audit import logins
        from agentsite.audit.tracking import track

        logins.connect()
        track(
            get_user_model(),
            object_type="user",
            exclude=("last_login",),
            secret=("password",),
            m2m=("groups", "user_permissions"),
        )
        track(Group, object_type="group", m2m=("permissions",))
        from agentsite import signals

        signals.connect()
