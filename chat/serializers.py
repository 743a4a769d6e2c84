from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentsite.fields import StrictBooleanField, StrictCharField, StrictChoiceField, StrictRegexField
from chat.models import SESSION_ID_PATTERN


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
