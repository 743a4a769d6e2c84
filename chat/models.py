"""Chat sessions and their messages, including the durable pending queue.

A user message row is written before it is acknowledged; its `queue_order` is its submission ordinal
in the session, so a restored message goes back to its original position by ordering alone.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentsite.isotime import iso
from chat.statuses import MessageStatus

SESSION_ID_PATTERN = r"^[A-Za-z0-9:._-]{1,128}$"


class Session(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    id = models.CharField(primary_key=True, max_length=128)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions")
    agent_name = models.CharField(max_length=64, default="default")
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    paused = models.BooleanField(default=False)
    # Highest event seq that may have been handed out (events.py reserves seqs in blocks), so seqs are
    # never reused across restarts.
    seq_reserved = models.BigIntegerField(default=0)
    # Fencing token of the process that owns the live session (chat/live/cluster/ownership.py): queue
    # writes are accepted only from the holder of the largest token, so a process that lost its lease
    # changes nothing.
    owner_token = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    # The approval mode a client last chose for this chat (docs/protocol.md extensions "Sessions"): a
    # remembered preference that the portal sends with each message; a message without one is still `ask`.
    approval_mode = models.CharField(max_length=16, default="ask")
    archived_at = models.DateTimeField(null=True, blank=True)  # archived: left out of lists by default
    # Deleted from the user's lists (closed as well); its history stays readable by id, as a closed one's.
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="chat_session_user_created")]

    def __str__(self) -> str:
        return self.title or self.id

    @property
    def is_open(self) -> bool:
        return self.status == self.Status.OPEN

    def mark_closed(self) -> None:
        self.status = self.Status.CLOSED
        self.closed_at = timezone.now()
        self.paused = False
        self.save(update_fields=["status", "closed_at", "paused", "updated_at"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "agent_name": self.agent_name,
            "title": self.title,
            "status": self.status,
            "approval_mode": self.approval_mode,
            "archived_at": iso(self.archived_at),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        SYSTEM = "system"

    Status = MessageStatus  # chat/statuses.py: what each one means

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    message_id = models.CharField(max_length=128)
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)  # what the model streamed as `thinking` with this answer
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETED)
    reply_to = models.CharField(max_length=128, blank=True)  # the user message whose turn wrote this row
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True)
    usage = models.JSONField(null=True, blank=True)
    queue_order = models.BigIntegerField(null=True, blank=True)
    steer_requested = models.BooleanField(default=False)
    config = models.JSONField(null=True, blank=True)
    approval_mode = models.CharField(max_length=16, default="ask")
    model = models.CharField(max_length=200, blank=True)
    # A user message whose turn ended `error`: the `{code, message}` its `result` carried (the reason stays).
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # When the row entered the conversation the model sees: a user message when its turn starts or it is
    # steered into a turn (not when it was queued), other rows when written. History is ordered by it.
    entered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["session", "message_id"], name="chat_message_unique_id"),
            models.CheckConstraint(
                condition=Q(status__in=MessageStatus.values), name="chat_message_status_known"
            ),
        ]
        indexes = [models.Index(fields=["session", "status"], name="chat_message_session_status")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "message_id": self.message_id,
            "role": self.role,
            "content": self.content,
            "status": self.status,
            "created_at": iso(self.created_at),
        }
        if self.tool_calls:
            data["tool_calls"] = self.tool_calls
        if self.reasoning:
            data["reasoning"] = self.reasoning
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.usage:
            data["usage"] = self.usage
        if self.reply_to:
            data["reply_to"] = self.reply_to
        if self.error:
            data["error"] = self.error
        if self.role == self.Role.ASSISTANT and self.content:
            from chat.markdown import render_markdown

            data["html"] = render_markdown(self.content)
        return data


class Usage(models.Model):
    """A user's model tokens per UTC day and model (docs/protocol.md §6.4): added to as each model step of a
    turn ends (chat/usage.py), read for `GET /api/v1/usage`, the portal's chart and the daily budget."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage")
    day = models.DateField()
    model = models.CharField(max_length=200)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    total_tokens = models.BigIntegerField(default=0)
    requests = models.PositiveIntegerField(default=0)  # model calls (steps)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "day", "model"], name="chat_usage_unique_day")]
        ordering = ["-day", "model"]

    def __str__(self) -> str:
        return f"{self.user_id} {self.day} {self.model}: {self.total_tokens}"
