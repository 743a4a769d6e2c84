"""The one timestamp format of the API (docs/protocol.md extensions "Timestamps"): ISO 8601 in UTC with `Z`.

DRF's serializer fields already write `Z`; rows that build their own dicts (`to_dict`) write through
:func:`iso` so that every response and event spells a time the same way.
"""

from __future__ import annotations

import datetime as dt
from typing import overload


@overload
def iso(value: dt.datetime) -> str: ...
@overload
def iso(value: None) -> None: ...
@overload
def iso(value: dt.datetime | None) -> str | None: ...


def iso(value: dt.datetime | None) -> str | None:
    """`2026-01-02T03:04:05.123456Z` (None stays None); a naive value is taken as UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
