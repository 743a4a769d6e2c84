from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Users, their API keys, sign-in and the lockout, and the sockets that follow their account
    (docs/architecture.md). The models keep the tables they had in the `agentsite` app (migrations 0001)."""

    name = "accounts"
    verbose_name = "Accounts and API keys"

    def ready(self) -> None:
        """The audit trail follows logins and the accounts (accounts/logins.py, audit/tracking.py);
        open sockets follow their account (accounts/signals.py)."""
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        from accounts import logins, signals
        from audit.tracking import track

        logins.connect()
        track(
            get_user_model(),
            object_type="user",
            exclude=("last_login",),
            secret=("password",),
            m2m=("groups", "user_permissions"),
        )
        track(Group, object_type="group", m2m=("permissions",))
        signals.connect()
