"""How many messages may wait in a user's queues (docs/protocol.md §6.6): AGENTSITE_SESSION_MAX_PENDING per
session and AGENTSITE_USER_MAX_PENDING over a user's open sessions. Checked by the store (chat/store.py) at
the first write of a pending message, whichever process makes it; a refusal is `queue_full` (REST 429) and
is counted in the audit trail (audit/limits.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.conf import settings
from django.db import connection

from agents.contract import InputError
from agentsite.db import table
from audit.limits import limit_hit_record
from chat.models import Message, Session
from chat.statuses import MessageStatus


class QueueFull(InputError):
    """A pending message past AGENTSITE_SESSION_MAX_PENDING or AGENTSITE_USER_MAX_PENDING: nothing stored."""

    def __init__(self, message: str, *, message_id: str, user_id: int, setting: str, limit: int) -> None:
        super().__init__("queue_full", message, message_id=message_id)
        self.user_id, self.setting, self.limit = user_id, setting, limit


def queue_room_check(session_id: str, message_id: str) -> None:
    """QueueFull when the session holds AGENTSITE_SESSION_MAX_PENDING pending messages already, or its user
    AGENTSITE_USER_MAX_PENDING over all their open sessions (docs/protocol.md §6.6). Checked by the first
    write of a pending message, whichever process makes it (the owner's store, or the process that stores a
    message for an owner elsewhere): one statement. A message that starts at once is not pending and is not
    checked. Concurrent writes to different sessions may each pass at the edge (by at most their number)."""
    per_session, per_user = settings.AGENTSITE_SESSION_MAX_PENDING, settings.AGENTSITE_USER_MAX_PENDING
    if not per_session and not per_user:
        return
    sessions, messages = table(Session), table(Message)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN m.session_id = %s THEN 1 ELSE 0 END), 0), MAX(s.user_id)"
            f" FROM {messages} m JOIN {sessions} s ON s.id = m.session_id"
            f" WHERE s.user_id = (SELECT user_id FROM {sessions} WHERE id = %s)"
            " AND s.status = %s AND m.role = %s AND m.status = %s",
            [session_id, session_id, Session.Status.OPEN, Message.Role.USER, MessageStatus.PENDING],
        )
        users, here, user_id = cursor.fetchone()
    if per_session and here >= per_session:
        message = (
            f"This chat's queue holds {here} messages, the most it may (AGENTSITE_SESSION_MAX_PENDING):"
            " this one was not queued. Wait until some have run, or remove some."
        )
        setting, limit = "AGENTSITE_SESSION_MAX_PENDING", per_session
    elif per_user and users >= per_user:
        message = (
            f"Your chats' queues hold {users} messages, the most they may (AGENTSITE_USER_MAX_PENDING):"
            " this one was not queued. Wait until some have run, or remove some."
        )
        setting, limit = "AGENTSITE_USER_MAX_PENDING", per_user
    else:
        return
    raise QueueFull(message, message_id=message_id, user_id=int(user_id), setting=setting, limit=limit)


@contextlib.contextmanager
def queue_full_recorded() -> Iterator[None]:
    """A refused message is counted in the audit trail (audit/limits.py: once per window), after
    the transaction it was refused in rolled back (a decorator of the store's writes)."""
    try:
        yield
    except QueueFull as exc:
        details = {"setting": exc.setting, "max": exc.limit, "message_id": exc.message_id}
        limit_hit_record(user_id=exc.user_id, limit="queue_full", message=exc.message, details=details)
        raise
