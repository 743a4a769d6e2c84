"""ACP runner configurations: which external agents an agent may delegate to (docs/protocol.md §2, §4).

The `args` and `env` JSON columns are read through `RunnerConfig` (pydantic), so a row edited by hand
that no longer has the right shape fails loudly with the runner's name instead of spawning nonsense.
`env` values are secrets: stored encrypted, write-only everywhere (docs/protocol.md §6.3).
"""

from __future__ import annotations

from typing import TypedDict

from django.db import models

from acp.updates import TOOL_PARSE_MODES, ToolParseMode
from agents.toolservers.models import ToolServer, ToolServerConfig
from security.encryption import unreadable_message

DEFAULT_TIMEOUT_SECONDS = 300
MAX_TIMEOUT_SECONDS = 86_400


class RunnerConfig(ToolServerConfig):
    """A runner row's settings in typed form: what the tool spawns and how it shows updates."""

    tool_parse_mode: ToolParseMode
    # Variables whose stored value no configured secrets key decrypts (security/encryption.py); they are
    # not in `env`, and the runner does not start until a staff user sets them again.
    unreadable_env: list[str] = []

    def unreadable_error(self) -> str | None:
        """Why the runner cannot start with its stored env, or None."""
        if not self.unreadable_env:
            return None
        names = ", ".join(self.unreadable_env)
        return unreadable_message(f"the env value of {names} of runner '{self.name}'")


class RunnerDict(TypedDict):
    """The wire form of one runner (RUNNER in docs/protocol.md §2); env values masked."""

    enabled: bool
    command: str
    args: list[str]
    env: dict[str, str]
    trusted: bool
    tool_parse_mode: str
    timeout_seconds: int
    sandbox_paths: list[str]


class AcpRunner(ToolServer):
    """One external agent (Claude Code, Gemini CLI, goose, ...) an agent may delegate work to; the common
    fields (name, enabled, command, args, env, sandbox_paths) are `ToolServer`'s (agents/toolservers/)."""

    agent = ToolServer.agent_field("acp_runners")
    trusted = models.BooleanField(
        default=False, help_text="Permission requests are answered 'allow once' without asking the user."
    )
    tool_parse_mode = models.CharField(
        max_length=16, choices=[(mode, mode) for mode in TOOL_PARSE_MODES], default="call_title"
    )
    timeout_seconds = ToolServer.timeout_field(DEFAULT_TIMEOUT_SECONDS)

    class Meta(ToolServer.Meta):
        verbose_name = "ACP runner"
        constraints = [
            *ToolServer.table_constraints("acp_runner"),
            models.CheckConstraint(
                condition=models.Q(tool_parse_mode__in=TOOL_PARSE_MODES), name="acp_runner_tool_parse_mode"
            ),
            models.CheckConstraint(
                condition=models.Q(enabled=False) | ~models.Q(command=""),
                name="acp_runner_enabled_has_command",
            ),
        ]

    def config(self) -> RunnerConfig:
        """The row as a validated RunnerConfig (raises pydantic.ValidationError on a malformed row)."""
        env, unreadable = self.readable("env")  # not a dict: a malformed row, refused just below
        return RunnerConfig.model_validate(
            {
                "name": self.name,
                "enabled": self.enabled,
                "command": self.command,
                "args": self.args,
                "env": env,
                "unreadable_env": unreadable,
                "trusted": self.trusted,
                "tool_parse_mode": self.tool_parse_mode,
                "timeout_seconds": self.timeout_seconds,
                "sandbox_paths": self.sandbox_paths,
            }
        )

    def to_dict(self) -> RunnerDict:
        return {
            "enabled": self.enabled,
            "command": self.command,
            "args": list(self.args),
            "env": self.masked("env"),
            "trusted": self.trusted,
            "tool_parse_mode": self.tool_parse_mode,
            "timeout_seconds": self.timeout_seconds,
            "sandbox_paths": list(self.sandbox_paths),
        }
