"""Writes and reads of ACP runner configs (REST, admin and the delegate tool all come through here).

The rows' reads and writes are the shared tool server store's (agents/toolservers/services.py): `PUT`
replaces a whole RUNNER, an env value sent as the mask keeps the stored one.
"""

from __future__ import annotations

from acp.models import AcpRunner, RunnerConfig
from agents.toolservers.services import ToolServerStore

runners: ToolServerStore[AcpRunner] = ToolServerStore(AcpRunner, noun="runner", label="Runner")
runner_list = runners.list  # `GET /agents/{name}/config/acp`: RUNNERs by name, env values masked
runner_get = runners.get
runner_upsert = runners.upsert
runner_delete = runners.delete  # open ACP sessions of a deleted runner end with their chat session


def runner_configs_for_agent(*, agent_name: str) -> dict[str, RunnerConfig]:
    """The agent's runners, by name, as typed configs (the delegate tool reads these).

    Read per tool call, from the database, so a change made through any process applies at once.
    """
    return {runner.name: runner.config() for runner in AcpRunner.objects.filter(agent_id=agent_name)}
