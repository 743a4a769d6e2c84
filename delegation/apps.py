from __future__ import annotations

from django.apps import AppConfig


class DelegationConfig(AppConfig):
    name = "delegation"
    label = "acp"  # the app is about ACP runners; the package name avoids clashing with the SDK's `acp`
    verbose_name = "External agents (ACP)"
