"""Persistence injected into SessionControllers: the durable queue, seq reservations, turn records."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from agents.contract import ChatRequest, InputError
from agentsite.db import database_sync_to_async, insert_row, table, update_rows
from chat.limits import queue_full_recorded, queue_room_check
from chat.models import Message, Session
from chat.statuses import MessageStatus
from chat.usage import usage_add

# The statuses this module writes (chat/statuses.py), bound once: the hot path looks up no enum attribute.
PENDING, RUNNING, STEERED = MessageStatus.PENDING, MessageStatus.RUNNING, MessageStatus.STEERED
COMPLETED, ERROR = MessageStatus.COMPLETED, MessageStatus.ERROR
STREAMING, INTERRUPTED = MessageStatus.STREAMING, MessageStatus.INTERRUPTED
ENTERS_HISTORY = frozenset({RUNNING, STEERED})
_ENTERED_AT = Message._meta.get_field("entered_at")
_ERROR = Message._meta.get_field("error")
TurnError = dict[str, str]  # the `{code, message}` of a turn that ended `error`
_UPDATED_AT = Session._meta.get_field("updated_at")

if TYPE_CHECKING:
    from chat.live.queue import PendingItem


@dataclass
class StoredState:
    user_id: int | None
    pending: list[PendingItem]
    paused: bool
    next_order: int
    seq_reserved: int
    running_message_ids: list[str]


class Fenced(Exception):
    """A newer owner holds the session: this process must not change it any more. `token`: the newest
    token the database has seen for it (when known)."""

    def __init__(self, message: str, token: int | None = None) -> None:
        super().__init__(message)
        self.token = token


def _check_fence(session_id: str, token: int) -> None:
    """Accept a write only from the owner with the current token (row-locked until the write commits)."""
    # SQL, not the ORM (agentsite/db.py): with several processes this runs before every write of a session.
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT owner_token FROM {table(Session)} WHERE id = %s{lock}", [session_id])
        row = cursor.fetchone()
    holder = row[0] if row is not None else None
    if holder != token:
        raise Fenced(f"Session {session_id} is owned by another process now.")


@dataclass(frozen=True)
class Fence:
    """The claim under which a process writes a session's live state: with several processes the fencing
    token it owns the session with (docs/architecture.md "Processes"), with one process None.

    The one fencing check of the database: every write of the live core — queue rows, the paused flag, seq
    reservations, and what a turn writes as it goes (its streaming and partial text, tool results, the usage
    it adds) — runs inside `writing()`, one transaction that first checks, row-locked, that the session still
    holds this token; otherwise Fenced, and nothing is written. An owner frozen past its lease and woken after
    another process took the session over changes nothing. (Events: chat/live/cluster/relay.py fences the
    replay stream the same way, against the lease in Redis.)"""

    session_id: str
    token: int | None = None

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Sync, in the database thread. One process: nothing to fence, and no BEGIN/COMMIT around the
        statements (they run for every message and every second of a streaming answer)."""
        if self.token is None:
            yield
            return
        with transaction.atomic():
            _check_fence(self.session_id, self.token)
            yield


class DjangoQueueStore:
    """QueueStore over Message rows: every queue change is written before it is acknowledged. `token`
    (several processes only) fences the writes (Fence; the lease: chat/live/cluster/ownership.py)."""

    def __init__(
        self,
        session_id: str,
        token: int | None = None,
        known: set[str] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
    ):
        self.session_id = session_id
        self.fence = Fence(session_id, token)
        self._known: set[str] = set(known or ())  # message ids already stored for this session
        # A write failed or was fenced (the exception): the live state can no longer be trusted.
        self._on_failure = on_failure

    async def save_message(
        self, item: PendingItem, *, status: MessageStatus, new: bool = False, error: TurnError | None = None
    ) -> None:
        await self._write(self._save_message, item, status, new, error)

    async def _write(self, write: Callable[..., None], *args: Any) -> None:
        try:
            await database_sync_to_async(write)(*args)
        except (DatabaseError, Fenced) as exc:
            self.storage_failed(exc)
            raise

    def storage_failed(self, exc: BaseException) -> bool:
        """A write failed, or was refused because another process owns the session now: either way what
        is live here is no longer the truth and goes (nothing more is written or published)."""
        if not isinstance(exc, (DatabaseError, Fenced)):
            return False
        if self._on_failure is not None:
            self._on_failure(exc)
        return True

    @queue_full_recorded()
    def _save_message(self, item: PendingItem, status: str, new: bool, error: TurnError | None) -> None:
        with self.fence.writing():
            self._write_message(item, status, new, error)

    def _write_message(self, item: PendingItem, status: str, new: bool, error: TurnError | None) -> None:
        request = item.request
        if new:
            if status == PENDING:
                queue_room_check(self.session_id, request.message_id)
            # The message's first write claims its id: the (session, message_id) constraint is the one rule
            # for duplicate ids, whatever the message collides with (queued, running, history).
            with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
                try:
                    self._insert(item, status)
                except IntegrityError:
                    raise _duplicate(request.message_id) from None
            self._known.add(request.message_id)
            self._title_from_first_message(item)
            return
        if request.message_id not in self._known:
            # Stored before, by another process or before a restart; or, without `new`, stored now.
            try:
                # A savepoint only inside a transaction; in autocommit a failed INSERT leaves nothing open.
                with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
                    self._insert(item, status, error)
                self._known.add(request.message_id)
                self._title_from_first_message(item)
                return
            except IntegrityError:
                self._known.add(request.message_id)
        # Written as SQL (agentsite/db.py): this runs for every message.
        assignments = ["status = %s", "steer_requested = %s"]
        params: list[Any] = [status, item.steer_requested]
        if item.order >= 0:  # order < 0 marks a placeholder (interrupt_stored_turn): keep the stored position
            assignments.append("queue_order = %s")
            params.append(item.order)
        if error is not None:
            assignments.append("error = %s")
            params.append(_ERROR.get_db_prep_save(error, connection))
        if status in ENTERS_HISTORY:
            assignments.append("entered_at = COALESCE(entered_at, %s)")
            params.append(_ENTERED_AT.get_db_prep_save(timezone.now(), connection))
        elif status == PENDING:
            # Back in the queue (a steer the model never read, restored by a cancel or an error): it leaves
            # the conversation until its own turn starts or it is steered again; the snapshot shows it.
            assignments.append("entered_at = NULL")
        params += [self.session_id, request.message_id, Message.Role.USER]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table(Message)} SET {', '.join(assignments)}"
                " WHERE session_id = %s AND message_id = %s AND role = %s",
                params,
            )
        if status in (PENDING, RUNNING, STEERED):
            self._title_from_first_message(item)
        if status == INTERRUPTED:  # the answer its dead turn was streaming stays, marked as such
            Message.objects.filter(
                session_id=self.session_id, reply_to=request.message_id, status=STREAMING
            ).update(status=INTERRUPTED)

    def _title_from_first_message(self, item: PendingItem) -> None:
        """An untitled session takes the start of its first message (queue position 0) as its title.

        A new message is activity too: the session's `updated_at` moves (lists sort chats by it).
        SQL, not the ORM (agentsite/db.py): this runs for every message."""
        now = _UPDATED_AT.get_db_prep_save(timezone.now(), connection)
        title = " ".join(item.request.content.split())[:60] if item.order == 0 else ""
        with connection.cursor() as cursor:
            if title:
                cursor.execute(
                    f"UPDATE {table(Session)} SET title = %s, updated_at = %s WHERE id = %s AND title = ''",
                    [title, now, self.session_id],
                )
            cursor.execute(
                f"UPDATE {table(Session)} SET updated_at = %s WHERE id = %s AND updated_at < %s",
                [now, self.session_id, now],
            )

    def _insert(self, item: PendingItem, status: str, error: TurnError | None = None) -> None:
        _insert_user_message(
            self.session_id, item.request, status, order=item.order, steer=item.steer_requested, error=error
        )

    async def save_paused(self, paused: bool) -> None:
        await self._write(self._save_paused, paused)

    def _save_paused(self, paused: bool) -> None:
        with self.fence.writing():
            Session.objects.filter(id=self.session_id).update(paused=paused)

    async def reserve_seq(self, reserved: int) -> None:
        await self._write(self._reserve_seq, reserved)

    def _reserve_seq(self, reserved: int) -> None:
        with self.fence.writing():
            below = Session.objects.filter(id=self.session_id, seq_reserved__lt=reserved)
            below.update(seq_reserved=reserved)


@queue_full_recorded()
def message_store_pending(*, session_id: str, request: Any) -> None:
    """Store a message before its owner process has seen it (docs/architecture.md: the database is the
    truth). This write claims its id (a duplicate is refused, as the owner's store refuses one). It has
    no queue position yet (queue_order NULL): the owner gives it one when the command reaches it, or the
    next owner when it loads the queue (stored ones without a position go last, oldest first)."""
    try:
        with transaction.atomic():
            queue_room_check(session_id, request.message_id)
            _insert_user_message(session_id, request, PENDING)
    except IntegrityError:
        raise _duplicate(request.message_id) from None


def stored_for_later(session_ids: list[str]) -> dict[str, list[Any]]:
    """Messages stored while no owner could take them (no queue position yet), per session, oldest first."""
    found: dict[str, list[Any]] = {}
    rows = Message.objects.filter(
        session_id__in=session_ids, role=Message.Role.USER, status=PENDING, queue_order__isnull=True
    ).order_by("created_at", "id")
    for row in rows:
        request = _request(row.message_id, row.content, row.config, row.approval_mode, row.model)
        found.setdefault(row.session_id, []).append(request)
    return found


def _request(message_id: str, content: str, config: Any, approval_mode: Any, model: str) -> ChatRequest:
    """A stored user message as the request it was (its JSON config may arrive as text from SQL)."""
    config = json.loads(config) if isinstance(config, str) else config
    return ChatRequest(message_id, content, config=config, approval_mode=approval_mode, model=model or None)


def _insert_user_message(
    session_id: str,
    request: Any,
    status: str,
    *,
    order: int = -1,
    steer: bool = False,
    error: TurnError | None = None,
) -> None:
    insert_row(
        Message,
        session_id=session_id,
        message_id=request.message_id,
        role=Message.Role.USER,
        content=request.content,
        status=status,
        queue_order=order if order >= 0 else None,
        steer_requested=steer,
        config=request.config,
        approval_mode=request.approval_mode,
        model=request.model or "",
        entered_at=timezone.now() if status in ENTERS_HISTORY else None,
        error=error,
    )


@transaction.atomic
def load_state(session_id: str, *, seq_block: int, token: int | None = None) -> StoredState:
    """Read the stored queue and reserve a fresh block of seqs (sync; call via database_sync_to_async).

    With a fencing token, first claim it, refused (Fenced) unless above every earlier token (a Redis that
    lost its data counts from 1 again: the caller raises its counter). SQL: claim, then one read of all.
    """
    from chat.live.queue import PendingItem

    sessions, messages = table(Session), table(Message)
    with connection.cursor() as cursor:
        if token is None:
            cursor.execute(
                f"UPDATE {sessions} SET seq_reserved = seq_reserved + %s WHERE id = %s",
                [seq_block, session_id],
            )
        else:
            cursor.execute(
                f"UPDATE {sessions} SET seq_reserved = seq_reserved + %s, owner_token = %s"
                " WHERE id = %s AND owner_token < %s",
                [seq_block, token, session_id, token],
            )
        if cursor.rowcount == 0:
            stored = Session.objects.filter(id=session_id).values_list("owner_token", flat=True).first()
            if stored is None:
                raise Session.DoesNotExist(f"Session {session_id} does not exist.")
            raise Fenced(f"Session {session_id} was claimed with token {stored}.", stored)
        user = Message.Role.USER
        cursor.execute(
            f"SELECT s.user_id, s.paused, s.seq_reserved,"
            f" (SELECT MAX(queue_order) FROM {messages} WHERE session_id = %s AND role = %s),"
            " m.message_id, m.content, m.config, m.approval_mode, m.model, m.queue_order, m.status"
            f" FROM {sessions} s LEFT JOIN {messages} m"
            " ON m.session_id = s.id AND m.role = %s AND m.status IN (%s, %s, %s)"
            " WHERE s.id = %s ORDER BY m.queue_order IS NULL, m.queue_order, m.created_at, m.id",
            [session_id, user, user, PENDING, RUNNING, STEERED, session_id],
        )
        rows = cursor.fetchall()
    user_id, paused, seq_reserved, top = rows[0][:4]
    pending: list[PendingItem] = []
    running, steered = [], []  # message ids
    for *_, message_id, content, config, approval_mode, model, queue_order, status in rows:
        if status == RUNNING:
            running.append(message_id)
        elif status == STEERED:
            steered.append(message_id)
        elif status == PENDING:
            request = _request(message_id, content, config, approval_mode, model)
            # steer_requested: deferred steers belong to a turn that no longer exists
            pending.append(PendingItem(request=request, order=queue_order, steer_requested=False))
    next_order = (top + 1) if top is not None else 0
    for item in pending:
        if item.order is None:  # stored while the session had no owner
            item.order = next_order
            next_order += 1
    if steered:  # into a turn no process runs any more: they end with it (a turn runs only while owned)
        Message.objects.filter(session_id=session_id, message_id__in=steered).update(status=INTERRUPTED)
    return StoredState(
        user_id=user_id,
        pending=pending,
        paused=bool(paused),
        next_order=next_order,
        seq_reserved=seq_reserved - seq_block,
        running_message_ids=running,
    )


class DjangoTurnRecorder:
    """Stores what a turn produced (agents/recording.py) as Message rows: per model step one assistant row,
    written while it streams (status `streaming`), then `completed`, `cancelled` or `error`; tool results.
    Every write goes through `fence` (several processes: the token the session is owned with), so a turn
    whose process lost the session writes nothing more (Fenced ends it)."""

    def __init__(
        self,
        session_id: str,
        reply_to: str,
        model: str = "",
        user_id: int | None = None,
        *,
        token: int | None = None,
    ):
        self.session_id = session_id
        self.reply_to = reply_to
        self.model = model
        self.user_id = user_id  # whose usage a completed step adds to (chat/usage.py)
        self.fence = Fence(session_id, token)
        self._streaming: str | None = None  # message id of the row of the step that streams now
        self._step_at: dt.datetime | None = None  # when the step that streams now started

    def step_started(self) -> None:
        """Its row enters the conversation at this time (`entered_at`: the order the model saw)."""
        self._step_at = timezone.now()

    async def progress(self, content: str, reasoning: str) -> None:
        new = self._streaming is None
        if self._streaming is None:
            self._streaming = uuid.uuid4().hex
        await database_sync_to_async(self._write_progress)(self._streaming, content, reasoning, new)

    def _write_progress(self, row: str, content: str, reasoning: str, new: bool) -> None:
        with self.fence.writing():
            if new:
                self._insert(row, content, reasoning, STREAMING)
            else:
                self._update(row, content, reasoning, STREAMING)

    async def assistant_message(
        self,
        content: str,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: dict[str, Any] | None = None,
        reasoning: str = "",
    ) -> None:
        await self._end(content, reasoning, COMPLETED, tool_calls=tool_calls or None, usage=usage or None)

    async def partial(self, content: str, reasoning: str, status: str) -> None:
        await self._end(content, reasoning, status)

    async def _end(self, content: str, reasoning: str, status: str, **extra: Any) -> None:
        row, self._streaming = self._streaming, None
        await database_sync_to_async(self._write_end)(row, content, reasoning, status, **extra)

    def _write_end(self, row: str | None, content: str, reasoning: str, status: str, **extra: Any) -> None:
        """The step's row (new when nothing was written while it streamed: entered at the step's start),
        the session's `updated_at` (an answer is activity: lists sort chats by it), and, for a completed
        model call, the user's usage: one hand-over to the database thread."""
        with self.fence.writing():
            if row is None:
                self._insert(uuid.uuid4().hex, content, reasoning, status, **extra)
            else:
                self._update(row, content, reasoning, status, **extra)
            update_rows(Session, {"id": self.session_id}, updated_at=timezone.now())
            if status == COMPLETED and self.user_id is not None:
                usage_add(user_id=self.user_id, model=self.model, usage=extra.get("usage"))

    def _insert(self, message_id: str, content: str, reasoning: str, status: str, **extra: Any) -> None:
        insert_row(
            Message,
            session_id=self.session_id,
            message_id=message_id,
            role=Message.Role.ASSISTANT,
            content=content,
            reasoning=reasoning,
            status=status,
            reply_to=self.reply_to,
            model=self.model,
            entered_at=self._step_at or timezone.now(),
            **extra,
        )

    def _update(self, message_id: str, content: str, reasoning: str, status: str, **extra: Any) -> None:
        where = {"session_id": self.session_id, "message_id": message_id}
        if status == STREAMING:  # progress: a row marked interrupted meanwhile (taken over) stays so
            where["status"] = STREAMING
        update_rows(Message, where, content=content, reasoning=reasoning, status=status, **extra)

    async def tool_result(self, call_id: str, name: str, output: str, is_error: bool) -> None:
        await database_sync_to_async(self._write_tool_result)(call_id, output, is_error)

    def _write_tool_result(self, call_id: str, output: str, is_error: bool) -> None:
        with self.fence.writing():
            insert_row(
                Message,
                session_id=self.session_id,
                message_id=uuid.uuid4().hex,
                role=Message.Role.TOOL,
                content=output,
                status=ERROR if is_error else COMPLETED,
                reply_to=self.reply_to,
                tool_call_id=call_id,
                entered_at=timezone.now(),
            )


def history_for_model(session_id: str, *, before_message_id: str) -> list[dict[str, Any]]:
    """Earlier turns as OpenAI chat messages: user, assistant (with tool calls) and tool results.

    The rows as they are stored: a turn that was interrupted mid-tool leaves calls without results
    here, and the turn repairs them before the model sees them (agents/history.py), in one place."""
    # SQL, not the ORM (agentsite/db.py): this runs for every turn over the whole conversation.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT role, content, tool_calls, tool_call_id FROM {table(Message)}"
            " WHERE session_id = %s AND entered_at IS NOT NULL AND message_id <> %s ORDER BY entered_at, id",
            [session_id, before_message_id],
        )
        rows = cursor.fetchall()
    history: list[dict[str, Any]] = []
    for role, content, tool_calls, tool_call_id in rows:
        if role == Message.Role.TOOL:
            history.append({"role": "tool", "tool_call_id": tool_call_id, "content": content})
        elif role == Message.Role.ASSISTANT:
            entry: dict[str, Any] = {"role": "assistant", "content": content or None}
            # JSON arrives as text (SQLite; Django has psycopg load jsonb as text too).
            calls = json.loads(tool_calls) if isinstance(tool_calls, str) else tool_calls
            if calls:
                entry["tool_calls"] = calls
            history.append(entry)
        elif role == Message.Role.USER:
            history.append({"role": "user", "content": content})
    return history


def _duplicate(message_id: str) -> InputError:
    return InputError(
        "duplicate_message_id", f"Message {message_id} already exists in this session.", message_id=message_id
    )
