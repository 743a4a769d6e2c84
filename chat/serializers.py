from __future__ import annotations

from rest_framework import serializers

from agentsite.fields import StrictBooleanField, StrictCharField, StrictRegexField
from chat.frames import MAX_CONTENT_CHARS
from chat.models import SESSION_ID_PATTERN


class SessionCreateSerializer(serializers.Serializer):
    agent_name = StrictCharField(max_length=64, default="default")
    title = StrictCharField(max_length=200, allow_blank=True, default="")
    session_id = StrictRegexField(SESSION_ID_PATTERN, required=False, max_length=128)


class SessionUpdateSerializer(serializers.Serializer):
    title = StrictCharField(max_length=200, allow_blank=True)


class MessageCreateSerializer(serializers.Serializer):
    content = StrictCharField(allow_blank=False, trim_whitespace=False)
    message_id = StrictCharField(min_length=1, max_length=128, required=False)
    steer = StrictBooleanField(default=False)
    config = serializers.DictField(required=False)
    approval_mode = serializers.ChoiceField(["ask", "full_access", "read_only"], default="ask")
    model = StrictCharField(max_length=200, required=False)

    def validate_config(self, value: dict[str, object]) -> dict[str, object]:
        unknown = set(value) - {"generation"}
        if unknown:
            raise serializers.ValidationError(f"Unknown config keys: {', '.join(sorted(unknown))}.")
        if "generation" in value and not isinstance(value["generation"], dict):
            raise serializers.ValidationError("config.generation must be an object.")
        return value


class ConfirmationReplySerializer(serializers.Serializer):
    approved = StrictBooleanField()
    option_id = StrictCharField(max_length=128, required=False)


MAX_CONTENT = MAX_CONTENT_CHARS
