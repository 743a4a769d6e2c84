"""Writes and lookups for accounts and API keys (used by REST, WebSocket, commands and pages)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import DISPLAY_PREFIX_LENGTH, KEY_PREFIX, ApiKey, generate_key, hash_key
from agentsite.db import select_row
from agentsite.validation import invalid
from audit.actions import KEY_CREATE, KEY_REVOKE
from audit.services import audit_record
from security.ratelimit import hit, peek, rate_setting

LOCAL_USERNAME = "local"
FAILED_KEYS_REASON = "Too many wrong API keys from this address."
# Writing last_used_at on every request would turn every read into a write; once a minute is plenty.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@transaction.atomic
def api_key_create(*, user: User, name: str = "", expires_at: datetime | None = None) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret, which is shown once and never stored (nor audited).
    `expires_at` (optional) must lie in the future."""
    if expires_at is not None and expires_at <= timezone.now():
        raise invalid({"expires_at": ["Must be in the future."]})
    secret = generate_key()
    key = ApiKey.objects.create(
        user=user,
        name=name,
        prefix=secret[:DISPLAY_PREFIX_LENGTH],
        key_hash=hash_key(secret),
        expires_at=expires_at,
    )
    _audit_key(KEY_CREATE, key, "created")
    return key, secret


@transaction.atomic
def api_key_revoke(*, key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        _audit_key(KEY_REVOKE, key, "revoked")


def _audit_key(action: str, key: ApiKey, verb: str) -> None:
    owner = key.user.get_username()
    audit_record(
        action,
        object_type="api_key",
        object_id=key.pk,
        summary=f"API key {key.prefix}… ({key.name or 'unnamed'}) of {owner} {verb}",
        details={
            "owner": {"id": str(key.user_id), "username": owner},
            "name": key.name,
            "prefix": key.prefix,
        },
    )


def api_key_authenticate(secret: str) -> User | None:
    """The active user owning this key, or None for a wrong, revoked or expired key or a disabled user.

    Marks the key used (`last_used_at`) at most once a minute: reads stay reads. The UPDATE's condition
    keeps it to one write a minute when several requests or processes find it stale at once."""
    if not secret.startswith(KEY_PREFIX):
        return None
    # Two prepared statements (agentsite/db.py select_row) rather than the ORM's select_related query:
    # every request and handshake with a key runs this, and building that query cost more than the rest.
    key = select_row(ApiKey, key_hash=hash_key(secret))
    now = timezone.now()
    if key is None or key.refusal(now) is not None:
        return None
    user = select_row(get_user_model(), id=key.user_id)
    if user is None or not user.is_active:
        return None
    stale = now - LAST_USED_RESOLUTION
    if key.last_used_at is None or key.last_used_at < stale:
        ApiKey.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale), pk=key.pk).update(
            last_used_at=now
        )
    return user


@dataclass(frozen=True)
class KeyAttempt:
    """The outcome of presenting an API key: its user, or None (a wrong, revoked or expired key);
    `retry_after` > 0 when the key was not even looked at because its address sent too many wrong
    ones (the caller answers 429 / `rate_limited`)."""

    user: User | None
    retry_after: int = 0


def key_authenticate(secret: str, *, address: str) -> KeyAttempt:
    """Check an API key presented from `address`; a wrong one counts against the address
    (AGENTSITE_RATE_FAILED_KEYS: past the limit, 429 until the window closes, right keys included)."""
    rate = rate_setting("AGENTSITE_RATE_FAILED_KEYS")
    if rate is not None:
        failed = peek("failed-key", address, rate)
        if failed.count >= rate.count:
            return KeyAttempt(None, failed.retry_after)
    user = api_key_authenticate(secret) if secret else None
    if user is None and rate is not None:
        hit("failed-key", address, rate)
    return KeyAttempt(user)


def local_user() -> User:
    """The built-in user that unauthenticated requests act as under AGENTSITE_AUTH=open."""
    user, _ = get_user_model().objects.get_or_create(username=LOCAL_USERNAME)
    return user


@transaction.atomic
def user_create_first_admin(*, username: str, password: str, email: str = "") -> User:
    """Create the first account as a superuser; refuse once any user exists (the /setup/ page)."""
    user_model = get_user_model()
    if user_model.objects.select_for_update().exists():
        raise PermissionError("An account already exists.")
    return user_model.objects.create_superuser(username=username, password=password, email=email)


def setup_needed() -> bool:
    return not get_user_model().objects.exclude(username=LOCAL_USERNAME).exists()
