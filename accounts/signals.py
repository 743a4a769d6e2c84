"""What ends the open connections of an account (accounts/credentials.py): connected in apps.py.

Saves and deletions of users and API keys — wherever they happen: a request, the admin, a shell, a
command — and logouts tell the server processes what ended, once they commit."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save, pre_delete

from accounts.credentials import KEY_ENDED, SESSION_ENDED, USER_ENDED, credential_ended
from accounts.models import ApiKey


def _user_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if not instance.is_active and not created:
        credential_ended(instance.pk, reason=USER_ENDED)


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    # pre_delete: said before its keys' deletions (their post_delete) are, so that its clients learn why.
    credential_ended(instance.pk, reason=USER_ENDED)


def _key_saved(sender: Any, instance: ApiKey, created: bool, **kwargs: Any) -> None:
    refusal = instance.refusal()
    if refusal is not None and not created:
        credential_ended(instance.user_id, reason=KEY_ENDED[refusal], key_hash=instance.key_hash)


def _key_deleted(sender: Any, instance: ApiKey, **kwargs: Any) -> None:
    credential_ended(instance.user_id, reason=KEY_ENDED[None], key_hash=instance.key_hash)


def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if user is not None and user.pk is not None and session_key:
        credential_ended(user.pk, reason=SESSION_ENDED, session_key=session_key)


def connect() -> None:
    user_model = get_user_model()
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="accounts.credentials.user_saved")
    pre_delete.connect(_user_deleted, sender=user_model, dispatch_uid="accounts.credentials.user_deleted")
    post_save.connect(_key_saved, sender=ApiKey, dispatch_uid="accounts.credentials.key_saved")
    post_delete.connect(_key_deleted, sender=ApiKey, dispatch_uid="accounts.credentials.key_deleted")
    user_logged_out.connect(_logged_out, dispatch_uid="accounts.credentials.logged_out")
