"""API keys: one user may hold several; only a hash of the secret is stored."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Literal, TypedDict

from django.conf import settings
from django.db import models
from django.utils import timezone

from agentsite.isotime import iso

KEY_PREFIX = "ask_"
KEY_BODY_LENGTH = 40
DISPLAY_PREFIX_LENGTH = len(KEY_PREFIX) + 8


def generate_key() -> str:
    """`ask_` + 40 url-safe characters (docs/protocol.md §1)."""
    body = ""
    while len(body) < KEY_BODY_LENGTH:
        body += secrets.token_urlsafe(KEY_BODY_LENGTH)
    return KEY_PREFIX + body[:KEY_BODY_LENGTH]


def hash_key(key: str) -> str:
    # Keys carry ~240 bits of randomness, so a fast hash is enough (no password stretching needed).
    return hashlib.sha256(key.encode()).hexdigest()


KeyRefusal = Literal["revoked", "expired"]


def key_refusal(
    *, revoked_at: dt.datetime | None, expires_at: dt.datetime | None, now: dt.datetime
) -> KeyRefusal | None:
    """Why a key no longer authenticates (None: it does), whatever its user's state: the one rule, for
    requests, socket handshakes and the open sockets' checks (accounts/credentials.py)."""
    if revoked_at is not None:
        return "revoked"
    if expires_at is not None and expires_at <= now:
        return "expired"
    return None


class ApiKeyDict(TypedDict):
    id: str
    name: str
    prefix: str
    created_at: str
    expires_at: str | None
    expired: bool
    last_used_at: str | None
    revoked: bool


class ApiKey(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=DISPLAY_PREFIX_LENGTH, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agentsite_apikey"  # the table it had in the agentsite app (accounts/migrations/0001)
        ordering = ["-created_at", "-id"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def refusal(self, now: dt.datetime | None = None) -> KeyRefusal | None:
        return key_refusal(revoked_at=self.revoked_at, expires_at=self.expires_at, now=now or timezone.now())

    @property
    def expired(self) -> bool:
        return self.refusal() == "expired"

    def to_dict(self) -> ApiKeyDict:
        return {
            "id": str(self.pk),
            "name": self.name,
            "prefix": self.prefix,
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "expired": self.expired,
            "last_used_at": iso(self.last_used_at),
            "revoked": self.revoked,
        }
