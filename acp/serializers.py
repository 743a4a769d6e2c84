"""Validation of runner configs written over REST (docs/protocol.md §2 "ACP runners")."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from acp.models import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS
from acp.updates import TOOL_PARSE_MODES
from agents.toolservers.serializers import ProbeErrorSerializer, ToolServerInputSerializer
from agentsite.fields import StrictCharField, StrictChoiceField, StrictIntegerField


class RunnerInputSerializer(ToolServerInputSerializer):
    """The body of `PUT /agents/{name}/config/acp/{runner}`: a whole RUNNER; missing fields take defaults."""

    field_order = (
        "enabled",
        "command",
        "args",
        "env",
        "trusted",
        "tool_parse_mode",
        "timeout_seconds",
        "sandbox_paths",
    )
    command = StrictCharField(default="", allow_blank=True, max_length=1000, trim_whitespace=True)
    tool_parse_mode = StrictChoiceField(list(TOOL_PARSE_MODES), default="call_title")
    timeout_seconds = StrictIntegerField(
        default=DEFAULT_TIMEOUT_SECONDS, min_value=1, max_value=MAX_TIMEOUT_SECONDS
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["enabled"] and not attrs["command"]:
            raise serializers.ValidationError({"command": ["An enabled runner needs a command."]})
        return attrs


class RunnerSerializer(serializers.Serializer):
    """RUNNER as the API answers it (`AcpRunner.to_dict()`): `env` values masked."""

    enabled = serializers.BooleanField()
    command = serializers.CharField(allow_blank=True)
    args = serializers.ListField(child=serializers.CharField(allow_blank=True))
    env = serializers.DictField(child=serializers.CharField(), help_text='Each value is "***" (write-only).')
    trusted = serializers.BooleanField()
    tool_parse_mode = serializers.ChoiceField(list(TOOL_PARSE_MODES))
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=MAX_TIMEOUT_SECONDS)
    sandbox_paths = serializers.ListField(child=serializers.CharField())


class RunnerListSerializer(serializers.Serializer):
    runners = serializers.DictField(child=RunnerSerializer(), help_text="The agent's runners by name.")


class RunnerTestErrorSerializer(ProbeErrorSerializer):
    pass


class RunnerTestSerializer(serializers.Serializer):
    """What `POST …/acp/{runner}/test` found: who the runner is and what it supports, or why it failed."""

    ok = serializers.BooleanField()
    agent_info = serializers.DictField(
        required=False, allow_null=True, help_text="The runner's `agentInfo` {name, version, title?} or null."
    )
    protocol_version = serializers.IntegerField(required=False)
    capabilities = serializers.DictField(
        required=False, help_text="The runner's `agentCapabilities`, with ACP's names."
    )
    error = RunnerTestErrorSerializer(required=False)
