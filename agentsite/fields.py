"""Serializer fields that refuse type coercion (docs/protocol.md: `"steer": "yes"` is an error, not True).
Query parameters and ids in a URL are read by agentsite/query.py."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: "yes", 1 or "true" are refused."""

    def to_internal_value(self, data: object) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)  # raises ValidationError; DRF is untyped, so mypy cannot tell
        raise AssertionError("unreachable: Field.fail always raises")


def _a_string(field: serializers.CharField, data: object) -> str:
    """`data` as the strict text fields take it: a JSON string, at most `max_length` characters as sent.
    DRF counts them after trimming the whitespace around it, so "\r" + 100 characters passed a limit of 100
    that the OpenAPI document states (found by schemathesis)."""
    if not isinstance(data, str):
        raise serializers.ValidationError("Must be a string.")
    if field.max_length is not None and len(data) > field.max_length:
        field.fail("max_length", max_length=field.max_length)
    return data


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data: object) -> str:
        return super().to_internal_value(_a_string(self, data))


class StrictRegexField(serializers.RegexField):
    """A name or an id, matched whole and as sent. DRF trims it first (so "\rg" passed as the name "g") and
    searches the pattern, whose `$` also matches before a final newline (so "local\n" became an id, and a
    session id that no lookup finds again)."""

    def __init__(self, regex: str, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(regex, **kwargs)
        self.whole = re.compile(regex)

    def to_internal_value(self, data: object) -> str:
        value = super().to_internal_value(_a_string(self, data))
        if not self.whole.fullmatch(value):
            self.fail("invalid")
        return value


class StrictURLField(serializers.URLField):
    """A URL as sent: whitespace around it is not part of a URL."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: object) -> str:
        return super().to_internal_value(_a_string(self, data))


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


class StrictPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A related row's id as a JSON string (or null where allowed): DRF takes `""` for null and looks up
    `5` as `"5"`; neither is an id."""

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data == "":
            raise serializers.ValidationError("Must be an id, or null.")
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)
