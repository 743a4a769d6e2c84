"""REST for agents and providers: site configuration, readable by all, writable by staff."""

from __future__ import annotations

import re
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import DEFAULT_AGENT, NAME_PATTERN, Agent, Provider, SiteDefault
from agents.serializers import (
    ActiveModelOutSerializer,
    ActiveModelSerializer,
    AgentSerializer,
    ProviderPageSerializer,
    ProviderSerializer,
    ProviderTestSerializer,
    ToolItemSerializer,
    ToolSwitchSerializer,
)
from agents.services import provider_models_found, site_default_adopt, tool_items_for, tool_set_enabled
from agentsite.errors import ApiError
from agentsite.openapi import PAGE_PARAMETERS, errors
from agentsite.pagination import CursorPage
from agentsite.permissions import IsStaffOrReadOnly
from agentsite.validation import invalid

STAFF_ONLY = "forbidden: only staff can change site configuration"
AGENT_NOT_FOUND = errors({404: "not_found: no such agent"})


class AtomicWrites:
    """A write and its audit entry (audit/tracking.py) commit together, or neither does."""

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            serializer.save()

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            serializer.save()

    def perform_destroy(self, instance: Any) -> None:
        with transaction.atomic():
            instance.delete()


class AgentPage(CursorPage):
    ordering = ("name",)


class ProviderPage(CursorPage):
    ordering = ("id",)


@extend_schema_view(
    post=extend_schema(
        responses={201: AgentSerializer, **errors({403: STAFF_ONLY})},
        examples=[
            OpenApiExample(
                "A reviewer",
                {"name": "reviewer", "description": "Reads diffs", "system_prompt": "Review the change."},
                request_only=True,
            )
        ],
    ),
)
class AgentListApi(AtomicWrites, generics.ListCreateAPIView[Agent]):
    queryset = Agent.objects.all()
    serializer_class = AgentSerializer
    permission_classes = [IsStaffOrReadOnly]
    pagination_class = AgentPage


@extend_schema_view(
    get=extend_schema(responses={200: AgentSerializer, **AGENT_NOT_FOUND}),
    patch=extend_schema(responses={200: AgentSerializer, **AGENT_NOT_FOUND, **errors({403: STAFF_ONLY})}),
    delete=extend_schema(
        responses={
            204: None,
            **AGENT_NOT_FOUND,
            **errors({403: STAFF_ONLY, 409: "protected: the default agent cannot be deleted"}),
        }
    ),
)
class AgentDetailApi(AtomicWrites, generics.RetrieveUpdateDestroyAPIView[Agent]):
    queryset = Agent.objects.all()
    serializer_class = AgentSerializer
    permission_classes = [IsStaffOrReadOnly]
    lookup_field = "name"
    http_method_names = ["get", "patch", "delete", "head", "options"]

    def perform_destroy(self, instance: Agent) -> None:
        if instance.name == DEFAULT_AGENT:
            raise ApiError(409, "protected", "The default agent always exists and cannot be deleted.")
        super().perform_destroy(instance)


@extend_schema_view(
    get=extend_schema(parameters=PAGE_PARAMETERS, responses=ProviderPageSerializer),
    post=extend_schema(
        responses={201: ProviderSerializer, **errors({403: STAFF_ONLY})},
        examples=[
            OpenApiExample(
                "A local Ollama",
                {
                    "id": "ollama",
                    "name": "Ollama",
                    "base_url": "http://127.0.0.1:11434/v1",
                    "models": ["llama3.2"],
                    "default_model": "llama3.2",
                },
                request_only=True,
            )
        ],
    ),
)
class ProviderListApi(AtomicWrites, generics.ListCreateAPIView[Provider]):
    queryset = Provider.objects.all()
    serializer_class = ProviderSerializer
    permission_classes = [IsStaffOrReadOnly]
    pagination_class = ProviderPage

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            site_default_adopt(provider=serializer.save())

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().list(request, *args, **kwargs)
        site = SiteDefault.objects.filter(id=1).first()
        active = {"provider_id": site.provider_id, "model": site.model} if site and site.provider_id else None
        response.data["active"] = active
        return response


PROVIDER_NOT_FOUND = errors({404: "not_found: no such provider"})


@extend_schema_view(
    get=extend_schema(responses={200: ProviderSerializer, **PROVIDER_NOT_FOUND}),
    patch=extend_schema(
        responses={200: ProviderSerializer, **PROVIDER_NOT_FOUND, **errors({403: STAFF_ONLY})}
    ),
    delete=extend_schema(responses={204: None, **PROVIDER_NOT_FOUND, **errors({403: STAFF_ONLY})}),
)
class ProviderDetailApi(AtomicWrites, generics.RetrieveUpdateDestroyAPIView[Provider]):
    queryset = Provider.objects.all()
    serializer_class = ProviderSerializer
    permission_classes = [IsStaffOrReadOnly]
    http_method_names = ["get", "patch", "delete", "head", "options"]


class ProviderActiveApi(APIView):
    permission_classes = [IsStaffOrReadOnly]

    @extend_schema(operation_id="providers_active_retrieve", responses=ActiveModelOutSerializer)
    def get(self, request: Request) -> Response:
        site = SiteDefault.objects.filter(id=1).first() or SiteDefault()  # a read writes no row
        return Response({"provider_id": site.provider_id, "model": site.model or None})

    @transaction.atomic
    @extend_schema(
        operation_id="providers_active_set",
        examples=[
            OpenApiExample(
                "The default model", {"provider_id": "openai", "model": "gpt-4o-mini"}, request_only=True
            )
        ],
        request=ActiveModelSerializer,
        responses={
            200: ActiveModelSerializer,
            **errors({403: STAFF_ONLY, 404: "not_found: no such provider"}),
        },
    )
    def put(self, request: Request) -> Response:
        data = ActiveModelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        provider = Provider.objects.filter(id=data.validated_data["provider_id"]).first()
        if provider is None:
            raise ApiError(404, "not_found", f"Provider {data.validated_data['provider_id']} not found.")
        site = SiteDefault.load()
        site.provider = provider
        site.model = data.validated_data["model"]
        site.save()
        return Response({"provider_id": provider.id, "model": site.model})


class ProviderTestApi(APIView):
    """Check that the endpoint answers and return its model list (staff: it makes an outbound call). The
    list found is kept on the provider (`discovered_models`) and offered in the portal's model fields.

    The answer holds the status and the model ids only (docs/protocol.md §6.3): the model client reads
    nothing else of the body and words every failure so that it cannot serve as a port scanner
    (agents/endpoints.py), and it connects only where the outbound rule allows.
    """

    permission_classes = [IsStaffOrReadOnly]

    @extend_schema(
        operation_id="providers_test",
        request=None,
        description="200 both when the endpoint answered with a model list (`ok: true`) and when not.",
        responses={200: ProviderTestSerializer, **PROVIDER_NOT_FOUND, **errors({403: STAFF_ONLY})},
    )
    def post(self, request: Request, pk: str) -> Response:
        from agents.llm import ModelError, OpenAIModelClient

        provider = Provider.objects.filter(id=pk).first()
        if provider is None:
            raise ApiError(404, "not_found", f"Provider {pk} not found.")
        client = OpenAIModelClient(
            base_url=provider.base_url,
            api_key=provider.api_key,
            provider_name=provider.name,
            timeout=10.0,
            max_retries=0,
        )
        try:
            models = async_to_sync(_list_and_close)(client)
        except ModelError as exc:
            return Response({"ok": False, "error": {"code": exc.code, "message": exc.message}, "models": []})
        provider_models_found(provider=provider, models=models)
        return Response({"ok": True, "models": models})


async def _list_and_close(client: Any) -> list[str]:
    try:
        return list(await client.list_models())
    finally:
        await client.aclose()


_CONFIG_NAME = re.compile(NAME_PATTERN)


class AgentConfigApi(APIView):
    """Base of the per-agent configuration endpoints (tools here, ACP runners in acp/api.py, MCP servers in
    mcpservers/api.py)."""

    permission_classes = [IsStaffOrReadOnly]

    def _agent(self, name: str) -> Agent:
        agent = Agent.objects.filter(name=name).first()
        if agent is None:
            raise ApiError(404, "not_found", f"Agent {name} not found.")
        return agent

    def _named(self, kind: str, name: str) -> str:
        """The name of a runner or MCP server from its URL (`PUT` creates it): 1-64 of `[A-Za-z0-9_-]`."""
        if not _CONFIG_NAME.fullmatch(name):
            raise invalid({"name": [f"A {kind} name is 1-64 letters, digits, '_' or '-'."]})
        return name

    def _set(self, name: str, tool: str, enabled: bool | None) -> Response:
        try:
            return Response(tool_set_enabled(agent=self._agent(name), tool_name=tool, enabled=enabled))
        except LookupError:
            raise ApiError(404, "not_found", f"Tool {tool} not found.") from None


TOOL_NOT_FOUND = errors({404: "not_found: no such agent, or no such tool"})


class AgentToolListApi(AgentConfigApi):
    @extend_schema(
        operation_id="agents_tools_list",
        description="A plain list (not paginated): every tool with this agent's switch.",
        responses={200: ToolItemSerializer(many=True), **AGENT_NOT_FOUND},
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(tool_items_for(agent=self._agent(name)))


class AgentToolToggleApi(AgentConfigApi):
    @extend_schema(
        operation_id="agents_tools_toggle",
        request=None,
        responses={200: ToolItemSerializer, **TOOL_NOT_FOUND, **errors({403: STAFF_ONLY})},
    )
    def patch(self, request: Request, name: str, tool: str) -> Response:
        return self._set(name, tool, None)


class AgentToolApi(AgentConfigApi):
    @extend_schema(
        operation_id="agents_tools_set",
        examples=[OpenApiExample("Switch off", {"enabled": False}, request_only=True)],
        request=ToolSwitchSerializer,
        responses={200: ToolItemSerializer, **TOOL_NOT_FOUND, **errors({403: STAFF_ONLY})},
    )
    def put(self, request: Request, name: str, tool: str) -> Response:
        data = ToolSwitchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._set(name, tool, data.validated_data["enabled"])
