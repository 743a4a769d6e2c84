"""Writes and lookups for chat sessions. One access function per resource serves REST, WS and pages."""

from __future__ import annotations

import contextlib
import re
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from agents.contract import ApprovalMode, ChatRequest, InputError
from agents.models import DEFAULT_AGENT
from agents.services import agent_exists, default_agent_ensure
from agentsite.db import database_call, select_row, table
from agentsite.exceptions import check_limit
from audit.actions import SESSION_DELETE
from audit.services import audit_record
from chat.exceptions import AgentNotFound, SessionClosed, SessionExists, SessionNotFound
from chat.live import live_sessions
from chat.live.commands import Submit
from chat.models import SESSION_ID_PATTERN, Message, Session
from chat.runtime import model_refusal
from chat.statuses import MessageStatus

_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def session_id_is_valid(session_id: str) -> bool:
    return bool(_SESSION_ID.fullmatch(session_id))


def session_list_for_user(*, user: User) -> QuerySet[Session]:
    """The user's sessions, archived ones included; deleted ones are gone from every list."""
    return Session.objects.filter(user=user, deleted_at__isnull=True)


def session_search_for_user(*, user: User, q: str = "", archived: bool = False) -> QuerySet[Session]:
    """`GET /chat/sessions?q=&archived=` (docs/protocol.md extensions "Sessions"): archived or not, and
    with `q`, those whose title or a user or assistant message contains it (case-insensitive)."""
    sessions = session_list_for_user(user=user).filter(archived_at__isnull=not archived)
    q = q.strip()
    if q:
        said = Message.objects.filter(
            session=OuterRef("pk"),
            role__in=(Message.Role.USER, Message.Role.ASSISTANT),
            entered_at__isnull=False,
            content__icontains=q,
        )
        sessions = sessions.filter(Q(title__icontains=q) | Exists(said))
    return sessions


def session_get_for_user(*, user: User, session_id: str) -> Session:
    """The user's session; another user's session is reported exactly like a missing one."""
    # SQL, not the ORM (agentsite/db.py): every socket that opens and every request on a session asks.
    session = select_row(Session, id=session_id, user_id=user.pk) if session_id_is_valid(session_id) else None
    if session is None:
        raise SessionNotFound(f"Session {session_id} not found")
    return session


def session_get_open_for_user(*, user: User, session_id: str) -> Session:
    session = session_get_for_user(user=user, session_id=session_id)
    if not session.is_open:
        raise SessionClosed(f"Session {session_id} is closed")
    return session


def session_create(
    *, user: User, agent_name: str = "default", title: str = "", session_id: str | None = None
) -> Session:
    if not agent_exists(name=agent_name):
        if agent_name != DEFAULT_AGENT:
            raise AgentNotFound(f"Agent {agent_name} not found")
        default_agent_ensure()  # "an agent named default always exists", even after a table flush
    limit = settings.AGENTSITE_USER_MAX_SESSIONS
    if limit:
        check_limit(_open_sessions(user.pk), limit, what="open chats", setting="AGENTSITE_USER_MAX_SESSIONS")
    session_id = session_id or str(uuid.uuid4())
    try:
        with transaction.atomic():
            return Session.objects.create(id=session_id, user=user, agent_name=agent_name, title=title)
    except IntegrityError:
        # The same answer whoever owns it: the id is taken, nothing more (docs/protocol.md).
        raise SessionExists(f"The session id {session_id} is already in use; choose another.") from None


def session_get_or_create_open(
    *, user: User, session_id: str, agent_name: str = DEFAULT_AGENT, title: str = ""
) -> Session:
    """A socket's `?create=1` (docs/protocol.md §3.1 extension): the user's open session with this id, else
    a new one as `POST /chat/sessions` makes it (same checks, same errors; an id another user holds is
    `session_exists`, as for POST). Two sockets of the user creating one id at once both get it."""
    try:
        return session_get_open_for_user(user=user, session_id=session_id)
    except SessionNotFound:
        try:
            return session_create(user=user, agent_name=agent_name, title=title, session_id=session_id)
        except SessionExists:
            with contextlib.suppress(SessionNotFound):
                return session_get_open_for_user(user=user, session_id=session_id)
            raise


def _open_sessions(user_id: int) -> int:
    """SQL, not the ORM (agentsite/db.py): every new chat asks."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {table(Session)} WHERE user_id = %s AND status = %s",
            [user_id, Session.Status.OPEN],
        )
        return int(cursor.fetchone()[0])


def session_update(
    *,
    session: Session,
    title: str | None = None,
    approval_mode: ApprovalMode | None = None,
    archived: bool | None = None,
) -> Session:
    """`PATCH /chat/sessions/{id}`: only the given fields change (a closed session may be renamed or
    archived too: that is bookkeeping, not input)."""
    fields = ["updated_at"]
    if title is not None:
        session.title = title
        fields.append("title")
    if approval_mode is not None:
        session.approval_mode = approval_mode
        fields.append("approval_mode")
    if archived is not None and archived != (session.archived_at is not None):
        session.archived_at = timezone.now() if archived else None
        fields.append("archived_at")
    session.save(update_fields=fields)
    return session


def session_forget(*, session: Session) -> Session:
    """Delete a session from the user's lists (`DELETE …?hide=true`): the caller closes it first; its
    history stays readable by id, as a closed session's does."""
    if session.deleted_at is None:
        session.deleted_at = timezone.now()
        session.save(update_fields=["deleted_at", "updated_at"])
    return session


@transaction.atomic
def session_close(*, session: Session) -> Session:
    """Close the session's rows: the live controller is closed by the caller (SessionService). A turn it
    did not end (its owner is gone) reads `cancelled`, as closing cancels it; the queue is `closed`."""
    Message.objects.filter(session=session, status=MessageStatus.RUNNING).update(
        status=MessageStatus.CANCELLED
    )
    Message.objects.filter(session=session, status=MessageStatus.PENDING).update(status=MessageStatus.CLOSED)
    session.mark_closed()
    return session


@transaction.atomic
def session_delete(*, session: Session, hide: bool = False) -> Session:
    """`DELETE /chat/sessions/{id}[?hide=true]`: close the session's rows (the caller has closed its live
    controller) and, with `hide`, take it out of every list; in the audit trail when anything changed."""
    closed = session.is_open
    hidden = hide and session.deleted_at is None
    if closed:
        session_close(session=session)
    if hidden:
        session_forget(session=session)
    if closed or hidden:
        what = " and ".join(word for word, done in (("closed", closed), ("hidden", hidden)) if done)
        audit_record(
            SESSION_DELETE,
            object_type="session",
            object_id=session.id,
            summary=f"chat '{session.title or session.id}' deleted ({what})",
            details={
                "session_id": session.id,
                "closed": closed,
                "hidden": hidden,
                "owner": str(session.user_id),
            },
        )
    return session


async def message_submit(
    *,
    session_id: str,
    content: str,
    message_id: str | None = None,
    steer: bool = False,
    config: dict[str, Any] | None = None,
    approval_mode: ApprovalMode = "ask",
    model: str | None = None,
    stream_events: bool = True,
    confirmation_timeout: float | None = None,
) -> dict[str, Any]:
    """Queue a user message (the socket's `message` frame, REST POST …/messages and cron runs).

    A client's `message_id` is refused when the session has it already (`duplicate_message_id`: its first
    write claims it, chat/store.py); the server assigns one otherwise. `stream_events` and
    `confirmation_timeout` are internal (cron runs, see ChatRequest); the edges never pass them.
    """
    # A model the agent may not use is refused here, where the message is accepted: a clear error to its
    # sender (REST 400, an `error` frame) before anything is stored. Its turn checks it once more
    # (chat/runtime.py turn_setup), because the configuration can change while the message waits.
    if model:
        refusal = await database_call(model_refusal, session_id, model)
        if refusal is not None:
            raise InputError(refusal["code"], refusal["message"], message_id=message_id)
    request = ChatRequest(
        message_id=message_id or uuid.uuid4().hex,
        content=content,
        config=config,
        approval_mode=approval_mode,
        model=model,
        stream_events=stream_events,
        confirmation_timeout=confirmation_timeout,
    )
    ack: dict[str, Any] = await live_sessions().dispatch(session_id, Submit(request=request, steer=steer))
    return ack


def message_list(*, session: Session) -> QuerySet[Message]:
    return Message.objects.filter(session=session, entered_at__isnull=False).order_by("entered_at", "id")
