"""REST for ACP runners per agent (docs/protocol.md §2): the tool server views (agents/toolservers/api.py)
with the runner's store, serializers and words, and the runner's Test (acp/probe.py).

Site configuration: readable by every user, writable by staff.
"""

from __future__ import annotations

from typing import cast

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import request_user
from acp.models import AcpRunner
from acp.serializers import (
    RunnerInputSerializer,
    RunnerListSerializer,
    RunnerSerializer,
    RunnerTestSerializer,
)
from acp.services import runners
from agents.api import STAFF_ONLY
from agents.toolservers.api import (
    ToolServerApi,
    ToolServerDetailApi,
    ToolServerListApi,
    detail_schema,
    list_schema,
    not_found,
)
from agentsite.openapi import errors


class _RunnerApi(ToolServerApi):
    store = runners
    kind = "runner"
    label = "Runner"
    input_serializer = RunnerInputSerializer


@extend_schema_view(**list_schema("agents_runners", RunnerListSerializer))
class AgentRunnerListApi(_RunnerApi, ToolServerListApi):
    listed_as = "runners"


@extend_schema_view(
    **detail_schema(
        "agents_runners",
        noun="runner",
        what="runner",
        answer=RunnerSerializer,
        request=RunnerInputSerializer,
        example=(
            "An external agent",
            {"enabled": True, "command": "codex-acp", "args": ["--quiet"], "timeout_seconds": 600},
        ),
    )
)
class AgentRunnerApi(_RunnerApi, ToolServerDetailApi):
    pass


class AgentRunnerTestApi(_RunnerApi):
    """Start the runner apart from any chat, shake hands (ACP `initialize`, `session/new`), stop it:
    `{ok, agent_info, protocol_version, capabilities}` or `{ok: false, error}` (acp/probe.py). Staff only:
    it starts a process."""

    @extend_schema(
        operation_id="agents_runners_test",
        request=None,
        description="200 both when the runner answered (`ok: true`) and when it did not.",
        responses={200: RunnerTestSerializer, **not_found("runner"), **errors({403: STAFF_ONLY})},
    )
    def post(self, request: Request, name: str, runner: str) -> Response:
        from acp.probe import runner_test

        agent = self._agent(name)
        found = cast(AcpRunner, self._server(agent, runner))
        return Response(runner_test(agent=agent, runner=found, user=request_user(request)))
