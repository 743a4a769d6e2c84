"""Per-user limits a user ran into (docs/protocol.md §6.6), in the audit trail without growing with a flood.

A refused socket, a refused frame or a refused message is counted here, in memory; an entry `limit.hit` is
written for the first refusal of a (user, limit) and then at most once per WINDOW_SECONDS, saying how many
refusals it stands for (`refused`: this one and those since the previous entry). A flood of 20,000 sockets
or of frames writes one entry a minute per process, not one per refusal. Bounded: the windows of at most
KEPT (user, limit) pairs are kept, the oldest forgotten first (a forgotten one starts over with an entry).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from agentsite.db import database_sync_to_async
from audit.actions import LIMIT_HIT
from audit.context import Actor

logger = logging.getLogger("audit")

WINDOW_SECONDS = 60.0
KEPT = 10_000


class LimitHits:
    """When a refusal is due an entry: the first of a (user, limit), then once per window."""

    def __init__(self, *, window: float = WINDOW_SECONDS, kept: int = KEPT) -> None:
        self.window = window
        self.kept = kept
        self._lock = threading.Lock()  # refusals are counted on the event loop and in request threads
        self._windows: OrderedDict[tuple[int, str], list[float]] = OrderedDict()  # → [opened, refused since]

    def hit(self, user_id: int, limit: str, *, now: float | None = None) -> int:
        """Count one refusal; the number of refusals an entry written now stands for, or 0: none is due."""
        now = time.monotonic() if now is None else now
        key = (user_id, limit)
        with self._lock:
            window = self._windows.get(key)
            if window is not None and now - window[0] < self.window:
                window[1] += 1
                return 0
            refused = 1 + (int(window[1]) if window is not None else 0)
            self._windows[key] = [now, 0]
            self._windows.move_to_end(key)
            while len(self._windows) > self.kept:
                self._windows.popitem(last=False)
            return refused

    def clear(self) -> None:
        with self._lock:
            self._windows.clear()


limit_hits = LimitHits()


def limit_hit_record(
    *,
    user_id: int,
    limit: str,
    message: str,
    details: dict[str, Any] | None = None,
    address: str | None = None,
) -> None:
    """Count a refusal of user `user_id` by `limit` (its error code: `too_many_sockets`, `rate_limited`,
    `queue_full`); write the entry when one is due (sync, in the caller's transaction)."""
    refused = limit_hits.hit(user_id, limit)
    if refused:
        try:
            _write(user_id, limit, message, refused, details or {}, address)
        except Exception:  # the refusal stands whatever becomes of its entry
            logger.exception("could not write the audit entry of user %s's %s", user_id, limit)


async def alimit_hit_record(
    *,
    user_id: int,
    limit: str,
    message: str,
    details: dict[str, Any] | None = None,
    address: str | None = None,
) -> None:
    """`limit_hit_record` from async code: the database is reached only when an entry is due."""
    refused = limit_hits.hit(user_id, limit)
    if refused:
        try:
            await database_sync_to_async(_write)(user_id, limit, message, refused, details or {}, address)
        except Exception:
            logger.exception("could not write the audit entry of user %s's %s", user_id, limit)


def _write(
    user_id: int, limit: str, message: str, refused: int, details: dict[str, Any], address: str | None
) -> None:
    from audit.services import _username_of, audit_record
    from security.ratelimit import ip_or_none

    times = "once" if refused == 1 else f"{refused} times"
    audit_record(
        LIMIT_HIT,
        object_type="user",
        object_id=user_id,
        summary=f"refused {times} by the limit {limit}: {message}",
        details={"limit": limit, "refused": refused, "window_seconds": limit_hits.window, **details},
        actor=Actor(user_id=user_id, username=_username_of(user_id), address=ip_or_none(address or "")),
    )
