"""Validation of MCP server configs written over REST (docs/protocol.md §2 "MCP servers")."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.toolservers.serializers import (
    ProbeErrorSerializer,
    ToolServerInputSerializer,
    checked_names,
    secret_map,
)
from agentsite.fields import StrictCharField, StrictChoiceField, StrictIntegerField
from mcpservers.endpoints import mcp_policy
from mcpservers.models import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, TRANSPORTS


class McpServerInputSerializer(ToolServerInputSerializer):
    """The body of `PUT /agents/{name}/config/mcp/{server}`: a whole MCP config; missing fields take
    defaults; unknown keys and wrongly typed values are refused."""

    read_only_keys = frozenset({"status"})  # a client may PUT back what it read
    field_order = (
        "enabled",
        "transport",
        "command",
        "args",
        "env",
        "url",
        "headers",
        "trusted_tools",
        "trusted",
        "timeout_seconds",
        "sandbox_paths",
    )
    transport = StrictChoiceField(list(TRANSPORTS), default="stdio")
    command = StrictCharField(
        default="", allow_blank=True, allow_null=True, max_length=1000, trim_whitespace=True
    )
    url = StrictCharField(
        default="", allow_blank=True, allow_null=True, max_length=2000, trim_whitespace=True
    )
    headers = secret_map()
    trusted_tools = serializers.ListField(child=StrictCharField(max_length=200), default=list, max_length=500)
    timeout_seconds = StrictIntegerField(
        default=DEFAULT_TIMEOUT_SECONDS, min_value=1, max_value=MAX_TIMEOUT_SECONDS
    )

    def validate_headers(self, value: dict[str, str]) -> dict[str, str]:
        value = checked_names(value, "header")
        for key, item in value.items():
            if any(c in key for c in " :\r") or "\r" in item or "\n" in item:
                raise serializers.ValidationError(f"{key!r}: header names and values are single-line text.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["command"] = attrs.get("command") or ""
        attrs["url"] = attrs.get("url") or ""
        if attrs["transport"] == "stdio" and attrs["enabled"] and not attrs["command"]:
            raise serializers.ValidationError({"command": ["An enabled stdio server needs a command."]})
        if attrs["transport"] == "http":
            if attrs["enabled"] and not attrs["url"]:
                raise serializers.ValidationError({"url": ["An enabled http server needs a url."]})
            if attrs["url"]:
                reason = mcp_policy(label="The URL").url_refusal(attrs["url"])
                if reason is not None:
                    raise serializers.ValidationError({"url": [reason]})
        return attrs


class McpToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)


class McpStatusSerializer(serializers.Serializer):
    state = serializers.ChoiceField(["unchecked", "ok", "error"])
    message = serializers.CharField(allow_null=True)
    checked_at = serializers.DateTimeField(allow_null=True)
    tools = McpToolSerializer(many=True)


class McpServerSerializer(serializers.Serializer):
    """SERVER as the API answers it (`McpServer.to_dict()`): `env` and `headers` values masked."""

    enabled = serializers.BooleanField()
    transport = serializers.ChoiceField(list(TRANSPORTS))
    command = serializers.CharField(allow_null=True)
    args = serializers.ListField(child=serializers.CharField(allow_blank=True))
    env = serializers.DictField(child=serializers.CharField(), help_text='Each value is "***" (write-only).')
    url = serializers.CharField(allow_null=True)
    headers = serializers.DictField(child=serializers.CharField(), help_text='Each value is "***".')
    trusted_tools = serializers.ListField(child=serializers.CharField())
    trusted = serializers.BooleanField()
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=MAX_TIMEOUT_SECONDS)
    sandbox_paths = serializers.ListField(child=serializers.CharField())
    status = McpStatusSerializer(read_only=True)


class McpServerListSerializer(serializers.Serializer):
    servers = serializers.DictField(child=McpServerSerializer(), help_text="The agent's servers by name.")


class McpErrorSerializer(ProbeErrorSerializer):
    pass


class McpTestSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    tools = McpToolSerializer(many=True)
    error = McpErrorSerializer(required=False)
