from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.models import NAME_PATTERN, Agent, Provider


class ProviderSerializer(serializers.ModelSerializer):
    id = serializers.RegexField(NAME_PATTERN, max_length=64)
    api_key = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=500)
    api_key_set = serializers.SerializerMethodField()
    models = serializers.ListField(
        source="model_list", child=serializers.CharField(max_length=200), required=False, default=list
    )
    default_model = serializers.CharField(max_length=200, required=False, allow_blank=True, allow_null=True)

    class Meta:
        model = Provider
        fields = ["id", "name", "base_url", "api_key", "api_key_set", "models", "default_model", "created_at"]
        read_only_fields = ["created_at"]

    def get_api_key_set(self, obj: Provider) -> bool:
        return bool(obj.api_key)

    def validate_id(self, value: str) -> str:
        if self.instance is not None and value != self.instance.id:
            raise serializers.ValidationError("The id of a provider cannot change.")
        if self.instance is None and Provider.objects.filter(id=value).exists():
            raise serializers.ValidationError(f"A provider with id {value!r} already exists.")
        return value

    def validate_default_model(self, value: str | None) -> str:
        return value or ""

    def to_representation(self, instance: Provider) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["default_model"] = data.get("default_model") or None
        return data


class AgentSerializer(serializers.ModelSerializer):
    name = serializers.RegexField(NAME_PATTERN, max_length=64)
    provider = serializers.PrimaryKeyRelatedField(
        queryset=Provider.objects.all(), required=False, allow_null=True
    )

    class Meta:
        model = Agent
        fields = ["name", "description", "system_prompt", "provider", "model", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def validate_name(self, value: str) -> str:
        if self.instance is not None and value != self.instance.name:
            raise serializers.ValidationError("An agent cannot be renamed.")
        if self.instance is None and Agent.objects.filter(name=value).exists():
            raise serializers.ValidationError(f"An agent named {value!r} already exists.")
        return value


class ActiveModelSerializer(serializers.Serializer):
    provider_id = serializers.CharField(max_length=64)
    model = serializers.CharField(max_length=200)
