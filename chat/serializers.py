from __future__ import annotations

from rest_framework import serializers

from agentsite.fields import StrictCharField, StrictRegexField
from chat.models import SESSION_ID_PATTERN


class SessionCreateSerializer(serializers.Serializer):
    agent_name = StrictCharField(max_length=64, default="default")
    title = StrictCharField(max_length=200, allow_blank=True, default="")
    session_id = StrictRegexField(SESSION_ID_PATTERN, required=False, max_length=128)


class SessionUpdateSerializer(serializers.Serializer):
    title = StrictCharField(max_length=200, allow_blank=True)
