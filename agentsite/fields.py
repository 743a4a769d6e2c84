"""Serializer fields that refuse type coercion (docs/protocol.md: `"steer": "yes"` is an error, not True)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: "yes", 1 or "true" are refused."""

    def to_internal_value(self, data: object) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)  # raises ValidationError; DRF is untyped, so mypy cannot tell
        raise AssertionError("unreachable: Field.fail always raises")


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


class StrictURLField(serializers.URLField):
    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """Only JSON integers: "300", 30.5 and true are refused (no coercion, like the other strict fields)."""

    def to_internal_value(self, data: object) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise serializers.ValidationError("Must be an integer.")
        return int(super().to_internal_value(data))


class StrictChoiceField(serializers.ChoiceField):
    def to_internal_value(self, data: object) -> Any:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


class StrictDateTimeField(serializers.DateTimeField):
    """Only ISO 8601 strings (a time without an offset is UTC): numbers are refused, not read as epochs."""

    def to_internal_value(self, data: object) -> Any:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be an ISO 8601 date and time (a string).")
        return super().to_internal_value(data)
