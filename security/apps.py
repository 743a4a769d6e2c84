from __future__ import annotations

from django.apps import AppConfig


class SecurityConfig(AppConfig):
    """The guards every app uses and none owns: the outbound URL guard, encryption of secrets at rest and
    their model fields, rate limits (docs/architecture.md). No models; `manage.py rotate_secrets` is here."""

    name = "security"
    verbose_name = "Security"
