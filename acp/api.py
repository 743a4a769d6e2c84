"""REST for ACP runners per agent (docs/protocol.md §2): the tool server views (agents/toolservers/api.py)
with the runner's store, serializers and words, and the runner's Test (acp/probe.py).

Site configuration: readable by every user, writable by staff.
"""

from __future__ import annotations

from acp.serializers import (
    RunnerInputSerializer,
    RunnerListSerializer,
    RunnerSerializer,
    RunnerTestSerializer,
)
from acp.services import runners
from agents.toolservers.api import ToolServerApi, ToolServerDetailApi, ToolServerListApi, ToolServerTestApi


class _RunnerApi(ToolServerApi):
    store, input_serializer = runners, RunnerInputSerializer
    operation = "agents_runners"


class AgentRunnerListApi(_RunnerApi, ToolServerListApi):
    answer = RunnerListSerializer


class AgentRunnerApi(_RunnerApi, ToolServerDetailApi):
    answer = RunnerSerializer
    example = (
        "An external agent",
        {"enabled": True, "command": "codex-acp", "args": ["--quiet"], "timeout_seconds": 600},
    )


class AgentRunnerTestApi(_RunnerApi, ToolServerTestApi):
    """Start the runner apart from any chat, shake hands (ACP `initialize`, `session/new`), stop it:
    `{ok, agent_info, protocol_version, capabilities}` or `{ok: false, error}` (acp/probe.py). Staff only:
    it starts a process."""

    answer, probe = RunnerTestSerializer, "acp.probe.runner_test"
    test_description = "200 both when the runner answered (`ok: true`) and when it did not."
