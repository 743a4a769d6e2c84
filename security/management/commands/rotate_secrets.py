"""`manage.py rotate_secrets`: re-encrypt every stored secret with the first AGENTSITE_SECRETS_KEY.

Every encrypted field of every model (security/secret_fields.py) is covered, so a new one needs nothing
here. Idempotent: a value the first key made already is left alone; run it again and it changes nothing.
A value no configured key opens is left as it is and named (a staff user must enter it again).
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from security.secret_fields import ENCRYPTED_FIELDS, rotate_column


class Command(BaseCommand):
    help = "Re-encrypt every stored secret with the first key of AGENTSITE_SECRETS_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        rotated = current = 0
        unreadable: list[str] = []
        with transaction.atomic():
            for model in apps.get_models():
                for field in model._meta.concrete_fields:
                    if not isinstance(field, ENCRYPTED_FIELDS):
                        continue
                    result = rotate_column(model, field.name)
                    rotated += result.rotated
                    current += result.current
                    label = f"{model._meta.label}.{field.name}"
                    unreadable += [f"{label} of {model._meta.pk.name}={pk!r}" for pk in result.unreadable]
                    self.stdout.write(
                        f"{label}: {result.rotated} re-encrypted, {result.current} already current"
                        + (f", {len(result.unreadable)} unreadable" if result.unreadable else "")
                    )
        self.stdout.write(f"{rotated} rows re-encrypted with the first key, {current} already current.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} rows hold a value no configured key decrypts (left as they are): "
                + "; ".join(unreadable)
                + ". Add the key they were stored with to AGENTSITE_SECRETS_KEY, or enter them again."
            )
