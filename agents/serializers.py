from __future__ import annotations

from typing import Any

from django.db import models as db_models
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from agents.endpoints import provider_policy
from agents.models import NAME_PATTERN, Agent, Provider
from agentsite.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictPrimaryKeyRelatedField,
    StrictRegexField,
    StrictURLField,
)


class SandboxPathsField(serializers.ListField):
    """`sandbox_paths` of an ACP runner or an MCP server: host paths its program needs to see, each one
    the site allows (agents/sandbox/site.py `sandbox_path_refusal`: absolute, no data dir, no code)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("default", list)
        child = StrictCharField(trim_whitespace=False, max_length=4096)
        super().__init__(child=child, max_length=64, **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        from agents.sandbox.site import sandbox_path_refusal

        value: list[str] = super().to_internal_value(data)
        errors = [reason for reason in map(sandbox_path_refusal, value) if reason is not None]
        if errors:
            raise serializers.ValidationError(errors)
        return value


# `/providers/active` is a route of its own: a provider with that id could never be read or changed.
RESERVED_PROVIDER_IDS = frozenset({"active"})


class StrictModelSerializer(serializers.ModelSerializer):
    """Model serializers whose text fields take JSON strings only (no 12 → "12")."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        db_models.CharField: StrictCharField,
        db_models.TextField: StrictCharField,
        db_models.URLField: StrictURLField,
    }


class ProviderSerializer(StrictModelSerializer):
    """A model endpoint speaking the OpenAI chat-completions API; `api_key` is write-only."""

    id = StrictRegexField(NAME_PATTERN, max_length=64)
    api_key = StrictCharField(write_only=True, required=False, allow_blank=True, max_length=500)
    api_key_set = serializers.SerializerMethodField()
    models = serializers.ListField(
        source="model_list", child=StrictCharField(max_length=200), required=False, default=list
    )
    default_model = StrictCharField(max_length=200, required=False, allow_blank=True, allow_null=True)
    discovered_models = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The model ids the last successful test listed (offered; they allow nothing).",
    )

    class Meta:
        model = Provider
        fields = [
            "id",
            "name",
            "base_url",
            "api_key",
            "api_key_set",
            "models",
            "default_model",
            "discovered_models",
            "created_at",
        ]
        read_only_fields = ["created_at"]

    def get_api_key_set(self, obj: Provider) -> bool:
        return bool(obj.api_key)

    def validate_id(self, value: str) -> str:
        if self.instance is not None and value != self.instance.id:
            raise serializers.ValidationError("The id of a provider cannot change.")
        if value in RESERVED_PROVIDER_IDS:
            raise serializers.ValidationError(f"{value!r} is reserved; choose another id.")
        if self.instance is None and Provider.objects.filter(id=value).exists():
            raise serializers.ValidationError(f"A provider with id {value!r} already exists.")
        return value

    def validate_base_url(self, value: str) -> str:
        """http(s) only, never a link-local or metadata address (docs/protocol.md §6.3); checked again, after
        DNS, on every request."""
        reason = provider_policy(label="The URL").url_refusal(value)
        if reason is not None:
            raise serializers.ValidationError(reason)
        return value

    def validate_default_model(self, value: str | None) -> str:
        return value or ""

    def to_representation(self, instance: Provider) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["default_model"] = data.get("default_model") or None
        return data


class AgentSerializer(StrictModelSerializer):
    """An agent: its prompt, and the provider and model it uses (null: the site default)."""

    name = StrictRegexField(NAME_PATTERN, max_length=64)
    provider = StrictPrimaryKeyRelatedField(queryset=Provider.objects.all(), required=False, allow_null=True)
    sandbox_network = StrictBooleanField(required=False)
    allowed_models = serializers.ListField(
        child=StrictCharField(max_length=200), required=False, max_length=200
    )

    class Meta:
        model = Agent
        fields = [
            "name",
            "description",
            "system_prompt",
            "provider",
            "model",
            "sandbox_network",
            "allowed_models",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]

    def validate_name(self, value: str) -> str:
        if self.instance is not None and value != self.instance.name:
            raise serializers.ValidationError("An agent cannot be renamed.")
        if self.instance is None and Agent.objects.filter(name=value).exists():
            raise serializers.ValidationError(f"An agent named {value!r} already exists.")
        return value


class ActiveModelSerializer(serializers.Serializer):
    provider_id = StrictCharField(max_length=64)
    model = StrictCharField(max_length=200)


class ToolSwitchSerializer(serializers.Serializer):
    enabled = StrictBooleanField()


# -- what the agent and provider endpoints answer besides the model serializers (the OpenAPI document) --


class ActiveModelOutSerializer(serializers.Serializer):
    """The site default: the provider and model of agents without their own (null: the demo model)."""

    provider_id = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)


@extend_schema_serializer(many=False)  # the page itself, not a list of pages
class ProviderPageSerializer(serializers.Serializer):
    results = ProviderSerializer(many=True)
    next = serializers.CharField(
        allow_null=True, help_text="The `cursor` of the next page; null on the last."
    )
    active = ActiveModelOutSerializer(allow_null=True)


class ModelErrorSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="unreachable, not_a_model_list, auth_failed, address_refused or secret_unreadable"
    )
    message = serializers.CharField()


class ProviderTestSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    models = serializers.ListField(
        child=serializers.CharField(), help_text="The endpoint's model ids, sorted."
    )
    error = ModelErrorSerializer(required=False)


class ToolItemSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    enabled = serializers.BooleanField()
    risk = serializers.ChoiceField(choices=["safe", "dangerous"])
    parameters = serializers.DictField(help_text="The tool's JSON Schema of its arguments.")
