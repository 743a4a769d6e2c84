"""Writes and reads of ACP runner configs (REST, admin and the delegate tool all come through here)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from acp.models import AcpRunner, RunnerConfig, RunnerDict
from agents.models import Agent
from security.secret_fields import SECRET_MASK, MaskWithoutValue, unmasked


class RunnerEnvError(ValueError):
    """An env value was sent as the mask ("***") for a variable that has no stored value to keep."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key}: '{SECRET_MASK}' keeps a stored value, but this runner has none for {key}.")
        self.key = key


def runner_list(*, agent: Agent) -> dict[str, RunnerDict]:
    """`GET /agents/{name}/config/acp`: every runner of the agent by name, env values masked."""
    return {runner.name: runner.to_dict() for runner in AcpRunner.objects.filter(agent=agent)}


def runner_get(*, agent: Agent, name: str) -> AcpRunner | None:
    return AcpRunner.objects.filter(agent=agent, name=name).first()


@transaction.atomic
def runner_upsert(*, agent: Agent, name: str, data: dict[str, Any]) -> AcpRunner:
    """Create or replace a runner with validated `data` (a whole RUNNER).

    An env value equal to the mask keeps the stored value of that variable, so a client may PUT back
    what it read without wiping the secrets it was never shown.
    """
    current = AcpRunner.objects.select_for_update().filter(agent=agent, name=name).first()
    try:
        env = unmasked(data.get("env", {}), current.env if current is not None else {})
    except MaskWithoutValue as exc:
        raise RunnerEnvError(exc.key) from None
    runner, _ = AcpRunner.objects.update_or_create(
        agent=agent,
        name=name,
        defaults={
            "enabled": data["enabled"],
            "command": data["command"],
            "args": list(data["args"]),
            "env": env,
            "trusted": data["trusted"],
            "tool_parse_mode": data["tool_parse_mode"],
            "timeout_seconds": data["timeout_seconds"],
            "sandbox_paths": list(data.get("sandbox_paths", [])),
        },
    )
    return runner


def runner_delete(*, agent: Agent, name: str) -> bool:
    """Delete a runner; whether it existed. Open ACP sessions of it end with their chat session."""
    deleted, _ = AcpRunner.objects.filter(agent=agent, name=name).delete()
    return deleted > 0


def runner_configs_for_agent(*, agent_name: str) -> dict[str, RunnerConfig]:
    """The agent's runners, by name, as typed configs (the delegate tool reads these).

    Read per tool call, from the database, so a change made through any process applies at once.
    """
    return {runner.name: runner.config() for runner in AcpRunner.objects.filter(agent_id=agent_name)}
