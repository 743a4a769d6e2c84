"""Persistence injected into SessionControllers: the durable queue, seq reservations, turn records."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.db.models import Max

from django.utils import timezone

from chat.models import Message, Session

ENTERS_HISTORY = frozenset({"running", "steered"})

if TYPE_CHECKING:
    from chat.controller import PendingItem


@dataclass
class StoredState:
    pending: list[PendingItem]
    paused: bool
    next_order: int
    seq_reserved: int
    running_message_ids: list[str]


class DjangoQueueStore:
    """QueueStore over Message rows: every queue change is written before it is acknowledged."""

    def __init__(self, session_id: str):
        self.session_id = session_id

    async def save_message(self, item: PendingItem, *, status: str) -> None:
        await database_sync_to_async(self._save_message)(item, status)

    def _save_message(self, item: PendingItem, status: str) -> None:
        request = item.request
        updated = Message.objects.filter(
            session_id=self.session_id, message_id=request.message_id, role=Message.Role.USER
        ).update(
            status=status,
            steer_requested=item.steer_requested,
            # order < 0 marks a placeholder (interrupt_stored_turn): keep the stored position
            **({"queue_order": item.order} if item.order >= 0 else {}),
        )
        if updated and status in ENTERS_HISTORY:
            Message.objects.filter(
                session_id=self.session_id, message_id=request.message_id, entered_at__isnull=True
            ).update(entered_at=timezone.now())
        if not updated:
            Message.objects.create(
                session_id=self.session_id,
                message_id=request.message_id,
                role=Message.Role.USER,
                content=request.content,
                status=status,
                queue_order=item.order,
                steer_requested=item.steer_requested,
                config=request.config,
                approval_mode=request.approval_mode,
                model=request.model or "",
                entered_at=timezone.now() if status in ENTERS_HISTORY else None,
            )

    async def save_paused(self, paused: bool) -> None:
        await database_sync_to_async(self._save_paused)(paused)

    def _save_paused(self, paused: bool) -> None:
        Session.objects.filter(id=self.session_id).update(paused=paused)

    async def reserve_seq(self, reserved: int) -> None:
        await database_sync_to_async(self._reserve_seq)(reserved)

    def _reserve_seq(self, reserved: int) -> None:
        Session.objects.filter(id=self.session_id, seq_reserved__lt=reserved).update(seq_reserved=reserved)


def load_state(session_id: str, *, seq_block: int) -> StoredState:
    """Read the stored queue and reserve a fresh block of seqs (sync; call via database_sync_to_async)."""
    from chat.controller import ChatRequest, PendingItem

    session = Session.objects.get(id=session_id)
    rows = Message.objects.filter(session_id=session_id, role=Message.Role.USER)
    pending = [
        PendingItem(
            request=ChatRequest(
                message_id=row.message_id,
                content=row.content,
                config=row.config,
                approval_mode=row.approval_mode,  # type: ignore[arg-type]
                model=row.model or None,
            ),
            order=row.queue_order or 0,
            steer_requested=False,  # deferred steers belong to a turn that no longer exists
        )
        for row in rows.filter(status=Message.PENDING).order_by("queue_order", "id")
    ]
    top = rows.aggregate(top=Max("queue_order"))["top"]
    running = list(rows.filter(status=Message.RUNNING).values_list("message_id", flat=True))
    seq_reserved = session.seq_reserved
    Session.objects.filter(id=session_id).update(seq_reserved=seq_reserved + seq_block)
    return StoredState(
        pending=pending,
        paused=session.paused,
        next_order=(top + 1) if top is not None else 0,
        seq_reserved=seq_reserved,
        running_message_ids=running,
    )


class DjangoTurnRecorder:
    """Stores what a turn produced (assistant messages, tool results) as Message rows."""

    def __init__(self, session_id: str, reply_to: str, model: str = ""):
        self.session_id = session_id
        self.reply_to = reply_to
        self.model = model

    async def assistant_message(
        self,
        content: str,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        await database_sync_to_async(Message.objects.create)(
            session_id=self.session_id,
            message_id=uuid.uuid4().hex,
            role=Message.Role.ASSISTANT,
            content=content,
            status="completed",
            reply_to=self.reply_to,
            tool_calls=tool_calls or None,
            usage=usage or None,
            model=self.model,
            entered_at=timezone.now(),
        )

    async def tool_result(self, call_id: str, name: str, output: str, is_error: bool) -> None:
        await database_sync_to_async(Message.objects.create)(
            session_id=self.session_id,
            message_id=uuid.uuid4().hex,
            role=Message.Role.TOOL,
            content=output,
            status="error" if is_error else "completed",
            reply_to=self.reply_to,
            tool_call_id=call_id,
            entered_at=timezone.now(),
        )


def history_for_model(session_id: str, *, before_message_id: str) -> list[dict[str, Any]]:
    """Earlier turns as OpenAI chat messages: user, assistant (with tool calls) and tool results."""
    rows = (
        Message.objects.filter(session_id=session_id, entered_at__isnull=False)
        .exclude(message_id=before_message_id)
        .order_by("entered_at", "id")
    )
    history: list[dict[str, Any]] = []
    for row in rows:
        if row.role == Message.Role.TOOL:
            history.append({"role": "tool", "tool_call_id": row.tool_call_id, "content": row.content})
        elif row.role == Message.Role.ASSISTANT:
            entry: dict[str, Any] = {"role": "assistant", "content": row.content or None}
            if row.tool_calls:
                entry["tool_calls"] = row.tool_calls
            history.append(entry)
        elif row.role == Message.Role.USER:
            history.append({"role": "user", "content": row.content})
    return _drop_dangling_tool_calls(history)


def _drop_dangling_tool_calls(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An interrupted turn can leave tool calls without results; providers reject such a history."""
    answered = {m["tool_call_id"] for m in history if m["role"] == "tool"}
    cleaned: list[dict[str, Any]] = []
    for message in history:
        calls = message.get("tool_calls")
        if calls:
            kept = [call for call in calls if call.get("id") in answered]
            message = {**message}
            if kept:
                message["tool_calls"] = kept
            else:
                message.pop("tool_calls")
                if not message.get("content"):
                    continue
        cleaned.append(message)
    return cleaned
