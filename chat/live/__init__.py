"""The live sessions of this process: in-memory queues, turns and subscribers (docs/architecture.md).

- `controller.py` — one session's queue semantics (docs/protocol.md §3.4), with `active.py` (the turn
  that runs), `queue.py` (pending items, the store and publish it is built on), `confirmations.py`,
  `outcomes.py`;
- `events.py` — numbering and keeping a session's events for `?since=`;
- `registry.py` — one controller and event log per session, the turn slots;
- `sessions.py` — the facade the edges use, with its two topologies: `local.py` (one process) and
  `cluster/` (several processes on Postgres + Redis), chosen once, here;
- `commands.py` — the queue commands and their plain-data form; `sockets.py`; `bridge.py` (sync callers).

`live_sessions()` is the process's facade, made on first use; `reset_live_sessions()` shuts it down
(server shutdown, tests).
"""

from __future__ import annotations

from django.conf import settings

from agentsite.db import close_connection
from chat.live.events import UNAVAILABLE, Signal, SubscriberQueue
from chat.live.sessions import Attachment, LiveSessions, Unavailable

__all__ = [
    "UNAVAILABLE",
    "Attachment",
    "LiveSessions",
    "Signal",
    "SubscriberQueue",
    "Unavailable",
    "live_sessions",
    "reset_live_sessions",
]

_live: LiveSessions | None = None


def live_sessions() -> LiveSessions:
    """This process's live sessions: several processes share them when REDIS_URL is set."""
    global _live
    if _live is None:
        if settings.REDIS_URL:
            from chat.live.cluster.sessions import ClusterSessions

            _live = ClusterSessions()
        else:
            from chat.live.local import LocalSessions

            _live = LocalSessions()
    return _live


async def reset_live_sessions() -> None:
    """Shut down and forget this process's live sessions (server shutdown, tests), and close the database
    thread's connection (kept open between calls, agentsite/db.py): Postgres cannot drop a (test)
    database that still has a session."""
    global _live
    if _live is not None:
        await _live.shutdown()
    _live = None
    await close_connection()
