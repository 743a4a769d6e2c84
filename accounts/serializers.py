"""What the account endpoints (API keys, WebSocket tickets) take and answer (docs/protocol.md §1, §2)."""

from __future__ import annotations

from rest_framework import serializers

from agentsite.fields import StrictCharField, StrictDateTimeField


class KeyCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=100, allow_blank=True, default="")
    expires_at = StrictDateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="When the key stops working (ISO 8601; without an offset: UTC); null or absent: never.",
    )


class ApiKeySerializer(serializers.Serializer):
    """`ApiKey.to_dict()`: never the secret."""

    id = serializers.CharField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key's first characters, to recognise it by.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    expired = serializers.BooleanField()
    last_used_at = serializers.DateTimeField(allow_null=True, help_text="Kept to the minute.")
    revoked = serializers.BooleanField()


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="The key itself (`ask_` + 40 characters): shown this once only.")


class KeyRevokedSerializer(serializers.Serializer):
    id = serializers.CharField()
    revoked = serializers.BooleanField()


class WsTicketSerializer(serializers.Serializer):
    ticket = serializers.CharField(help_text="Opens one socket: `/api/v1/chat/ws/{session_id}?ticket=…`.")
    expires_at = serializers.DateTimeField(help_text="Unused by then, it opens nothing (60 s by default).")
