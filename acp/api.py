"""REST for ACP runners per agent (docs/protocol.md §2).

Site configuration: readable by every user, writable by staff.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import request_user
from acp.serializers import (
    RunnerInputSerializer,
    RunnerListSerializer,
    RunnerSerializer,
    RunnerTestSerializer,
)
from acp.services import RunnerEnvError, runner_delete, runner_get, runner_list, runner_upsert
from agents.api import AGENT_NOT_FOUND, STAFF_ONLY, AgentConfigApi
from agentsite.errors import ApiError
from agentsite.openapi import errors
from agentsite.validation import invalid

RUNNER_NOT_FOUND = errors({404: "not_found: no such agent, or no such runner of it"})


class AgentRunnerListApi(AgentConfigApi):
    @extend_schema(
        operation_id="agents_runners_list", responses={200: RunnerListSerializer, **AGENT_NOT_FOUND}
    )
    def get(self, request: Request, name: str) -> Response:
        return Response({"runners": runner_list(agent=self._agent(name))})


class AgentRunnerApi(AgentConfigApi):
    @extend_schema(
        operation_id="agents_runners_retrieve", responses={200: RunnerSerializer, **RUNNER_NOT_FOUND}
    )
    def get(self, request: Request, name: str, runner: str) -> Response:
        found = runner_get(agent=self._agent(name), name=runner)
        if found is None:
            raise ApiError(404, "not_found", f"Runner {runner} not found for agent {name}.")
        return Response(found.to_dict())

    @extend_schema(
        operation_id="agents_runners_put",
        examples=[
            OpenApiExample(
                "An external agent",
                {"enabled": True, "command": "codex-acp", "args": ["--quiet"], "timeout_seconds": 600},
                request_only=True,
            )
        ],
        description="Creates or replaces the runner; a runner name is 1-64 of `[A-Za-z0-9_-]`.",
        request=RunnerInputSerializer,
        responses={
            200: RunnerSerializer,
            **AGENT_NOT_FOUND,
            **errors({400: "invalid: `fields` names each problem", 403: STAFF_ONLY}),
        },
    )
    def put(self, request: Request, name: str, runner: str) -> Response:
        agent = self._agent(name)
        self._named("runner", runner)
        data = RunnerInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            stored = runner_upsert(agent=agent, name=runner, data=data.validated_data)
        except RunnerEnvError as exc:
            raise invalid({"env": [str(exc)]}) from None
        return Response(stored.to_dict())

    @extend_schema(
        operation_id="agents_runners_delete",
        responses={204: None, **RUNNER_NOT_FOUND, **errors({403: STAFF_ONLY})},
    )
    def delete(self, request: Request, name: str, runner: str) -> Response:
        if not runner_delete(agent=self._agent(name), name=runner):
            raise ApiError(404, "not_found", f"Runner {runner} not found for agent {name}.")
        return Response(status=204)


class AgentRunnerTestApi(AgentConfigApi):
    """Start the runner apart from any chat, shake hands (ACP `initialize`, `session/new`), stop it:
    `{ok, agent_info, protocol_version, capabilities}` or `{ok: false, error}` (acp/probe.py). Staff only:
    it starts a process."""

    @extend_schema(
        operation_id="agents_runners_test",
        request=None,
        description="200 both when the runner answered (`ok: true`) and when it did not.",
        responses={200: RunnerTestSerializer, **RUNNER_NOT_FOUND, **errors({403: STAFF_ONLY})},
    )
    def post(self, request: Request, name: str, runner: str) -> Response:
        from acp.probe import runner_test

        agent = self._agent(name)
        found = runner_get(agent=agent, name=runner)
        if found is None:
            raise ApiError(404, "not_found", f"Runner {runner} not found for agent {name}.")
        return Response(runner_test(agent=agent, runner=found, user=request_user(request)))
