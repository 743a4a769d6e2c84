"""Secrets at rest (docs/protocol.md §6.3): the site's Fernet keys, and sealing and opening one value.

Keys: `AGENTSITE_SECRETS_KEY`, comma-separated Fernet keys — the first encrypts, every one decrypts, so a
key is rotated by putting a new one first and running `manage.py rotate_secrets`. Unset: one key derived
from `SECRET_KEY` (see :func:`derived_key`). The keys derived from `SECRET_KEY` and `SECRET_KEY_FALLBACKS`
always decrypt too (never encrypt once `AGENTSITE_SECRETS_KEY` is set): rows written before an operator
set the variable stay readable until `rotate_secrets` has re-encrypted them.

What this protects: a copied database file, a dump, a backup, the WAL — they hold Fernet tokens, useless
without the key, which lives in the environment (or is derived from `SECRET_KEY`), never in the
database. What it does not protect against: someone who runs code as the server or reads its
environment, or who can write rows (a token copied from one row to another opens there too).

A stored value that no configured key opens (its key was rotated away) becomes an :class:`UnreadableSecret`
instead of an exception: a list of providers or runners still loads, the value still counts as set,
saving the row again keeps the stored token as it was, and whoever needs the value itself asks
:func:`reveal` and gets :class:`SecretUnreadable` with a sentence saying what to do.
"""

from __future__ import annotations

import base64
import functools
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

# The HKDF context of the key derived from SECRET_KEY. Fixed forever: changing it loses every stored secret.
DERIVATION_CONTEXT = b"agentsite secrets at rest, v1"


class SecretUnreadable(Exception):
    """A stored secret that no configured key decrypts was needed; the message says what to do."""


class Sealed(str):
    """A value that is already a Fernet token: the encrypted fields store it as it is.

    What `rotate_secrets` writes back, and the base of :class:`UnreadableSecret`.
    """

    __slots__ = ()


class UnreadableSecret(Sealed):
    """A stored token that no configured key decrypts, kept as it is (see the module's docstring).

    Truthy (a value is set); its text is the token, never a clear value; :func:`reveal` refuses it.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "UnreadableSecret(...)"


@functools.lru_cache(maxsize=8)
def derived_key(secret_key: str) -> str:
    """The Fernet key derived from a SECRET_KEY: HKDF-SHA256 with a fixed context string.

    Why HKDF and not a password hash (PBKDF2, scrypt): SECRET_KEY is a long random string, not a password
    (`check --deploy` refuses short or simple ones), so stretching it adds no strength; HKDF separates
    this use of it from Django's own (signing) by its context, and costs nothing at each process start.
    """
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=DERIVATION_CONTEXT).derive(
        secret_key.encode("utf-8")
    )
    return base64.urlsafe_b64encode(raw).decode("ascii")


def site_keys() -> list[str]:
    """The keys in the order MultiFernet tries them; the first one encrypts."""
    configured = list(getattr(settings, "AGENTSITE_SECRETS_KEYS", []))
    fallbacks = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    derived = [derived_key(str(key)) for key in fallbacks if key]
    return list(dict.fromkeys([*configured, *derived]))  # without repeats, first one first


def _fernet() -> MultiFernet:
    return _fernet_for(tuple(site_keys()))


@functools.lru_cache(maxsize=8)
def _fernet_for(keys: tuple[str, ...]) -> MultiFernet:
    from cryptography.fernet import Fernet, MultiFernet

    return MultiFernet([Fernet(key) for key in keys])


def encrypt(text: str) -> str:
    """A Fernet token for `text`, with the first key."""
    return _fernet().encrypt(text.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    """The text of a token, or an :class:`UnreadableSecret` (the token itself) when no key opens it."""
    from cryptography.fernet import InvalidToken

    try:
        return _fernet().decrypt(token.encode("utf-8")).decode("utf-8")
    except (InvalidToken, UnicodeDecodeError):
        return UnreadableSecret(token)


def reseal(token: str) -> str | None:
    """The token re-encrypted with the first key; the same token when the first key made it already
    (so `rotate_secrets` can tell what it changed); None when no key opens it."""
    from cryptography.fernet import Fernet, InvalidToken

    keys = site_keys()
    data = token.encode("utf-8")
    try:
        Fernet(keys[0]).decrypt(data)
        return token
    except InvalidToken:
        pass
    try:
        return _fernet().rotate(data).decode("ascii")
    except InvalidToken:
        return None


def is_unreadable(value: Any) -> bool:
    return isinstance(value, UnreadableSecret)


def reveal(value: str, *, what: str) -> str:
    """The clear value, or SecretUnreadable naming `what` ("the API key of provider 'openai'")."""
    if isinstance(value, UnreadableSecret):
        raise SecretUnreadable(unreadable_message(what))
    return str(value)


def unreadable_message(what: str) -> str:
    return (
        f"{what[:1].upper()}{what[1:]} cannot be decrypted with this server's AGENTSITE_SECRETS_KEY (it was "
        "stored with a key that is no longer configured). A staff user must enter it again, or the "
        "operator must add the old key back to AGENTSITE_SECRETS_KEY."
    )
