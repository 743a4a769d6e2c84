"""Validation of tool server configs written over REST (docs/protocol.md §2 "ACP runners", "MCP servers").

`PUT` takes a whole config: missing fields take defaults; unknown keys and wrongly typed values are refused,
each named in `fields`. Each app adds its protocol's fields and lists them all in `field_order`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers

from agents.serializers import SandboxPathsField
from agentsite.fields import StrictBooleanField, StrictCharField


def secret_map() -> serializers.DictField:
    """A JSON object of names to secret values (`env`, `headers`): write-only once stored."""
    return serializers.DictField(child=StrictCharField(allow_blank=True, trim_whitespace=False), default=dict)


def checked_names(value: dict[str, str], what: str) -> dict[str, str]:
    """`value` when each name is one an environment (or a header line) can hold."""
    for key in value:
        if not key or "=" in key or "\x00" in key or "\n" in key:
            raise serializers.ValidationError(f"{key!r} is not a valid {what} name.")
    return value


class ToolServerInputSerializer(serializers.Serializer):
    read_only_keys: ClassVar[frozenset[str]] = frozenset()  # in what GET answers, ignored by PUT
    field_order: ClassVar[tuple[str, ...]] = ()  # how the fields are listed (the document's order)

    enabled = StrictBooleanField(default=False)
    args = serializers.ListField(child=StrictCharField(allow_blank=True, trim_whitespace=False), default=list)
    env = secret_map()
    trusted = StrictBooleanField(default=False)
    sandbox_paths = SandboxPathsField()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields: dict[str, serializers.Field] = super().get_fields()
        return {**{name: fields[name] for name in self.field_order}, **fields}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields) - self.read_only_keys)
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
            data = {key: value for key, value in data.items() if key not in self.read_only_keys}
        return super().to_internal_value(data)

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        return checked_names(value, "environment variable")


# Why a tool server's Test failed (agents/toolservers/probe.py); each app names its own component.
class ProbeErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
