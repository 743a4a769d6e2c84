"""Typed parsers for settings read from the environment.

Each parser fails loudly (ImproperlyConfigured naming the variable) instead of guessing: a typo in a
deployment should stop the server at start-up, not change its behaviour quietly.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Rate:
    """At most `count` events per `seconds` (AGENTSITE_RATE_*: "1200/min", "30/min", "5/15min")."""

    count: int
    seconds: int

    def __str__(self) -> str:
        return f"{self.count}/{self.seconds}s"


_RATE_UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")
_RATE_OFF = {"off", "none", "0"}


def parse_rate(text: str) -> Rate | None:
    """`N/PERIOD` (PERIOD: an optional number and a unit, s/min/h/day) → Rate; "off" (or "none", "0")
    → None, no limit. Raises ValueError for anything else."""
    value = text.strip().lower()
    if value in _RATE_OFF:
        return None
    match = _RATE.match(value)
    if match is None or match.group(3) not in _RATE_UNITS:
        raise ValueError(f"{text!r} is not a rate")
    count, multiple, unit = int(match.group(1)), int(match.group(2) or 1), match.group(3)
    if count < 1 or multiple < 1:
        raise ValueError(f"{text!r} is not a rate")
    return Rate(count=count, seconds=multiple * _RATE_UNITS[unit])


def env_rate(name: str, default: str, *, environ: Mapping[str, str] = os.environ) -> str:
    """A rate setting (`parse_rate`), checked at start-up and kept as written (it is parsed where used,
    so tests may change it with `override_settings`)."""
    raw = environ.get(name)
    value = default if raw is None or not raw.strip() else raw.strip()
    try:
        parse_rate(value)
    except ValueError:
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a rate: write N/PERIOD, e.g. 1200/min, 30/min, 5/15min, 100/h or 'off'."
        ) from None
    return value


def env_networks(
    name: str, *, environ: Mapping[str, str] = os.environ
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """A comma-separated list of IP addresses or networks (CIDR), e.g. `127.0.0.1,10.0.0.0/8`."""
    networks = []
    for item in env_list(name, [], environ=environ):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an IP address or network.") from None
    return networks
