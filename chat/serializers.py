from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentsite.fields import StrictBooleanField, StrictCharField, StrictChoiceField, StrictRegexField
from agentsite.openapi import ErrorDetailSerializer
from chat.models import SESSION_ID_PATTERN, Session
from chat.statuses import MessageStatus


class SessionCreateSerializer(serializers.Serializer):
    agent_name = StrictCharField(max_length=64, default="default")
    title = StrictCharField(max_length=200, allow_blank=True, default="")
    session_id = StrictRegexField(SESSION_ID_PATTERN, required=False, max_length=128)


class SessionUpdateSerializer(serializers.Serializer):
    """PATCH: any of these; the ones left out keep their value."""

    title = StrictCharField(max_length=200, allow_blank=True, required=False)
    approval_mode = StrictChoiceField(choices=["ask", "full_access", "read_only"], required=False)
    archived = StrictBooleanField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:  # an empty PATCH is a mistake; the title is what PATCH was first for
            raise serializers.ValidationError(
                {"title": ["Give at least one of title, approval_mode, archived."]}
            )
        return attrs


# -- what the chat endpoints answer (the OpenAPI document; the views answer the models' `to_dict()`) --

APPROVAL_MODES = ["ask", "full_access", "read_only"]
# A message row's status as GET …/messages lists it (docs/protocol.md extensions "Messages"): a user
# message's, or an assistant step's (`streaming` while it streams). Messages still or never queued are not
# listed: pending, removed, closed.
_UNLISTED = {MessageStatus.PENDING, MessageStatus.REMOVED, MessageStatus.CLOSED}
MESSAGE_STATUSES = [status.value for status in MessageStatus if status not in _UNLISTED]


# The events a session's socket and SSE stream send (docs/protocol.md §3.1, §3.3).
EVENT_TYPES = [
    "connected",
    "resync",
    "message_status",
    "delta",
    "thinking",
    "tool_call",
    "tool_result",
    "delegate_update",
    "confirmation_request",
    "confirmation_resolved",
    "final_answer",
    "result",
    "error",
]
# One Server-Sent Event as it reads on the wire (`id:`, `event:`, `data:` lines), for the OpenAPI document.
SERVER_SENT_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": EVENT_TYPES},
        "id": {
            "type": "string",
            "pattern": "^[0-9]+$",
            "description": "The event's `seq` (not on every type)",
        },
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string", "enum": EVENT_TYPES}, "seq": {"type": "integer"}},
            },
            "description": "The event as the WebSocket sends it: JSON with its `type`.",
        },
    },
}


class SessionSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    agent_name = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=Session.Status.choices)
    approval_mode = serializers.ChoiceField(choices=APPROVAL_MODES)
    archived_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class PendingMessageSerializer(serializers.Serializer):
    message_id = serializers.CharField()
    content = serializers.CharField(allow_blank=True)
    position = serializers.IntegerField(min_value=0)
    steer_requested = serializers.BooleanField()


class WaitingForSerializer(serializers.Serializer):
    """Why a queue waits while nothing runs in its session (docs/protocol.md §6.4 extension)."""

    reason = serializers.ChoiceField(choices=["fair_share"])
    limit = serializers.IntegerField(help_text="AGENTSITE_USER_MAX_CONCURRENT_TURNS, its turns at once.")
    message = serializers.CharField(help_text="Why, and what frees it, in a sentence for the user.")


class SnapshotSerializer(serializers.Serializer):
    """SNAPSHOT (docs/protocol.md §3.3): the live state of the session's queue."""

    running = serializers.BooleanField()
    paused = serializers.BooleanField()
    active_message_id = serializers.CharField(allow_null=True)
    pending = PendingMessageSerializer(many=True)
    confirmations = serializers.ListField(
        child=serializers.DictField(), help_text="The `data` of each pending `confirmation_request`."
    )
    waiting_for = WaitingForSerializer(
        required=False, help_text="Only while the queue waits for one of its user's turn slots."
    )


class SessionDetailSerializer(SessionSerializer):
    snapshot = SnapshotSerializer()


class SessionClosedSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["closed"])


class MessageSerializer(serializers.Serializer):
    """One row of the stored conversation (docs/protocol.md §2 and extensions "Messages")."""

    message_id = serializers.CharField()
    role = serializers.ChoiceField(choices=["user", "assistant", "tool", "system"])
    content = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=MESSAGE_STATUSES)
    created_at = serializers.DateTimeField()
    tool_calls = serializers.ListField(child=serializers.DictField(), required=False)
    tool_call_id = serializers.CharField(required=False)
    reasoning = serializers.CharField(required=False, help_text="What the model streamed as `thinking`.")
    usage = serializers.DictField(required=False)
    reply_to = serializers.CharField(required=False, help_text="The user message whose turn wrote this row.")
    error = ErrorDetailSerializer(
        required=False, help_text="A user message whose turn ended `error`: the error its `result` carried."
    )
    html = serializers.CharField(
        required=False, help_text="An assistant row's Markdown, rendered and sanitised."
    )


class MessageAckSerializer(serializers.Serializer):
    """The answer to a queue command: what became of the message (the `message_status` it announced)."""

    message_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["queued", "started", "steered", "removed", "restored"])
    position = serializers.IntegerField(
        min_value=0, required=False, help_text="Its 0-based place in the pending queue (queued)."
    )
    waiting_for = WaitingForSerializer(
        required=False, help_text="Queued because its user's turn slots are all taken (§6.4)."
    )


class CancelledSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["cancelled"])


class ConfirmationAnswerSerializer(serializers.Serializer):
    confirmation_id = serializers.CharField()
    approved = serializers.BooleanField()
    option_id = serializers.CharField(required=False)


# -- the workspace's files (chat/files_api.py) --


class FileEntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    path = serializers.CharField(help_text="Relative to the workspace, `/` separated.")
    type = serializers.ChoiceField(choices=["file", "directory", "symlink", "other"])
    size = serializers.IntegerField(allow_null=True, help_text="Bytes, for a file; else null.")
    modified_at = serializers.DateTimeField()


class FileListingSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="The folder listed, relative to the workspace (`.`: its root).")
    results = FileEntrySerializer(many=True)
    next = serializers.CharField(
        allow_null=True, help_text="The `cursor` of the next page; null on the last."
    )


class FilePreviewSerializer(serializers.Serializer):
    path = serializers.CharField()
    name = serializers.CharField()
    truncated = serializers.BooleanField(help_text="Only the first 256 KiB were read.")
    kind = serializers.ChoiceField(choices=["text", "markdown", "image", "binary"])
    content = serializers.CharField(required=False, allow_blank=True)
    html = serializers.CharField(required=False, allow_blank=True)
    language = serializers.CharField(required=False, allow_null=True)
    content_type = serializers.CharField(required=False)


class FileDeletedSerializer(serializers.Serializer):
    path = serializers.CharField()
    deleted = serializers.BooleanField()
