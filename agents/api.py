"""REST for agents and providers: site configuration, readable by all, writable by staff."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import DEFAULT_AGENT, Agent, Provider, SiteDefault
from agents.serializers import ActiveModelSerializer, AgentSerializer, ProviderSerializer
from agents.services import tool_items_for, tool_set_enabled
from agentsite.errors import ApiError
from agentsite.fields import StrictBooleanField
from agentsite.permissions import IsStaffOrReadOnly


class AtomicWrites:
    """A write and its audit entry (agentsite/audit/tracking.py) commit together, or neither does."""

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            serializer.save()

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            serializer.save()

    def perform_destroy(self, instance: Any) -> None:
        with transaction.atomic():
            instance.delete()


class AgentListApi(AtomicWrites, generics.ListCreateAPIView):
    queryset = Agent.objects.all()
    serializer_class = AgentSerializer
    permission_classes = [IsStaffOrReadOnly]
    pagination_class = None

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = self.get_serializer(self.get_queryset(), many=True).data
        return Response({"results": data, "next": None})


class AgentDetailApi(AtomicWrites, generics.RetrieveUpdateDestroyAPIView):
    queryset = Agent.objects.all()
    serializer_class = AgentSerializer
    permission_classes = [IsStaffOrReadOnly]
    lookup_field = "name"
    http_method_names = ["get", "patch", "delete", "head", "options"]

    def perform_destroy(self, instance: Agent) -> None:
        if instance.name == DEFAULT_AGENT:
            raise ApiError(409, "protected", "The default agent always exists and cannot be deleted.")
        super().perform_destroy(instance)


class ProviderListApi(AtomicWrites, generics.ListCreateAPIView):
    queryset = Provider.objects.all()
    serializer_class = ProviderSerializer
    permission_classes = [IsStaffOrReadOnly]
    pagination_class = None

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = self.get_serializer(self.get_queryset(), many=True).data
        site = SiteDefault.objects.filter(id=1).first()
        active = {"provider_id": site.provider_id, "model": site.model} if site and site.provider_id else None
        return Response({"results": data, "next": None, "active": active})


class ProviderDetailApi(AtomicWrites, generics.RetrieveUpdateDestroyAPIView):
    queryset = Provider.objects.all()
    serializer_class = ProviderSerializer
    permission_classes = [IsStaffOrReadOnly]
    http_method_names = ["get", "patch", "delete", "head", "options"]


class ProviderActiveApi(APIView):
    permission_classes = [IsStaffOrReadOnly]

    def get(self, request: Request) -> Response:
        site = SiteDefault.objects.filter(id=1).first() or SiteDefault()  # a read writes no row
        return Response({"provider_id": site.provider_id, "model": site.model or None})

    @transaction.atomic
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
    """Check that the endpoint answers and return its model list (staff: it makes an outbound call).

    The answer holds the status and the model ids only (docs/protocol.md §6.3): the model client reads
    nothing else of the body and words every failure so that it cannot serve as a port scanner
    (agents/endpoints.py), and it connects only where the outbound rule allows.
    """

    permission_classes = [IsStaffOrReadOnly]

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
        return Response({"ok": True, "models": models})


async def _list_and_close(client: Any) -> list[str]:
    try:
        return list(await client.list_models())
    finally:
        await client.aclose()


class AgentConfigApi(APIView):
    """Base of the per-agent configuration endpoints (tools here, ACP runners in acp/api.py)."""

    permission_classes = [IsStaffOrReadOnly]

    def _agent(self, name: str) -> Agent:
        agent = Agent.objects.filter(name=name).first()
        if agent is None:
            raise ApiError(404, "not_found", f"Agent {name} not found.")
        return agent

    def _set(self, name: str, tool: str, enabled: bool | None) -> Response:
        try:
            return Response(tool_set_enabled(agent=self._agent(name), tool_name=tool, enabled=enabled))
        except LookupError:
            raise ApiError(404, "not_found", f"Tool {tool} not found.") from None


class AgentToolListApi(AgentConfigApi):
    def get(self, request: Request, name: str) -> Response:
        return Response(tool_items_for(agent=self._agent(name)))


class AgentToolToggleApi(AgentConfigApi):
    def patch(self, request: Request, name: str, tool: str) -> Response:
        return self._set(name, tool, None)


class AgentToolApi(AgentConfigApi):
    class InputSerializer(serializers.Serializer):
        enabled = StrictBooleanField()

    def put(self, request: Request, name: str, tool: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._set(name, tool, data.validated_data["enabled"])
