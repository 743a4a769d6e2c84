"""Typed parsers for settings read from the environment.

Each parser fails loudly (ImproperlyConfigured naming the variable) instead of guessing: a typo in a
deployment should stop the server at start-up, not change its behaviour quietly.
"""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "", *, environ: Mapping[str, str] = os.environ) -> str:
    return environ.get(name, default).strip()


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] = os.environ) -> bool:
    raw = environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off."
    )


def env_int(
    name: str, default: int, *, minimum: int | None = None, environ: Mapping[str, str] = os.environ
) -> int:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}.")
    return value


def env_float(
    name: str, default: float, *, minimum: float | None = None, environ: Mapping[str, str] = os.environ
) -> float:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None
    if not math.isfinite(value):  # float() accepts "nan" and "inf"; no setting means either
        raise ImproperlyConfigured(f"{name}={raw!r} is not a finite number.")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}.")
    return value


def env_list(name: str, default: list[str], *, environ: Mapping[str, str] = os.environ) -> list[str]:
    raw = environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(
    name: str, default: str, choices: tuple[str, ...], *, environ: Mapping[str, str] = os.environ
) -> str:
    value = env_str(name, default, environ=environ).lower() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(choices)}.")
    return value


def env_fernet_keys(name: str, *, environ: Mapping[str, str] = os.environ) -> list[str]:
    """A comma-separated list of Fernet keys (docs/protocol.md §6.3: the first encrypts, all decrypt).

    Each must be 32 bytes in URL-safe base64 (what `Fernet.generate_key()` prints). The error names the
    variable and the position of the bad key, never the key itself: start-up errors end up in logs.
    """
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return []
    keys = [item.strip() for item in raw.split(",")]
    for position, key in enumerate(keys, start=1):
        try:
            decoded = base64.b64decode(key.encode("ascii"), altchars=b"-_", validate=True)
        except (ValueError, UnicodeEncodeError):
            decoded = b""
        if len(decoded) != 32 or len(key) != 44:
            raise ImproperlyConfigured(
                f"{name}: key {position} of {len(keys)} is not a Fernet key (32 bytes in URL-safe base64, "
                "44 characters). Make one with: python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'"
            )
    return keys
