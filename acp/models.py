"""ACP runner configurations: which external agents an agent may delegate to (docs/protocol.md §2, §4).

The `args` and `env` JSON columns are read through `RunnerConfig` (pydantic), so a row edited by hand
that no longer has the right shape fails loudly with the runner's name instead of spawning nonsense.
`env` values are secrets: stored encrypted, write-only everywhere (docs/protocol.md §6.3).
"""

from __future__ import annotations

from typing import TypedDict

import pydantic
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from acp.updates import TOOL_PARSE_MODES, ToolParseMode
from agents.models import NAME_PATTERN, Agent
from security.encryption import is_unreadable, unreadable_message
from security.secret_fields import SECRET_MASK, EncryptedJSONDictField

DEFAULT_TIMEOUT_SECONDS = 300
MAX_TIMEOUT_SECONDS = 86_400

runner_name_validator = RegexValidator(NAME_PATTERN, "Use 1-64 letters, digits, '_' or '-'.")


class RunnerConfig(pydantic.BaseModel):
    """A runner row's settings in typed form: what the tool spawns and how it shows updates."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    enabled: bool
    command: str
    args: list[str]
    env: dict[str, str]
    trusted: bool
    tool_parse_mode: ToolParseMode
    timeout_seconds: int = pydantic.Field(gt=0)
    sandbox_paths: list[str] = []
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


class AcpRunner(models.Model):
    """One external agent (Claude Code, Gemini CLI, goose, ...) an agent may delegate work to."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="acp_runners")
    name = models.CharField(max_length=64, validators=[runner_name_validator])
    enabled = models.BooleanField(default=False)
    command = models.CharField(max_length=1000, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = EncryptedJSONDictField(default=dict, blank=True)  # values encrypted (docs/protocol.md §6.3)
    trusted = models.BooleanField(
        default=False, help_text="Permission requests are answered 'allow once' without asking the user."
    )
    tool_parse_mode = models.CharField(
        max_length=16, choices=[(mode, mode) for mode in TOOL_PARSE_MODES], default="call_title"
    )
    timeout_seconds = models.PositiveIntegerField(
        default=DEFAULT_TIMEOUT_SECONDS, validators=[MinValueValidator(1)]
    )
    sandbox_paths = models.JSONField(
        default=list,
        blank=True,
        help_text="More host paths the runner's program needs, shown read-only in its sandbox (its "
        "executable and installation are shown automatically). Never the data directory or the code.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent", "name"]
        verbose_name = "ACP runner"
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="acp_runner_unique_name"),
            models.CheckConstraint(
                condition=models.Q(tool_parse_mode__in=TOOL_PARSE_MODES), name="acp_runner_tool_parse_mode"
            ),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__gte=1), name="acp_runner_timeout_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(enabled=False) | ~models.Q(command=""),
                name="acp_runner_enabled_has_command",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.name}"

    def config(self) -> RunnerConfig:
        """The row as a validated RunnerConfig (raises pydantic.ValidationError on a malformed row)."""
        env = self.env  # not a dict: a malformed row, refused just below
        unreadable = sorted(k for k, v in env.items() if is_unreadable(v)) if isinstance(env, dict) else []
        readable = {k: v for k, v in env.items() if k not in unreadable} if isinstance(env, dict) else env
        return RunnerConfig.model_validate(
            {
                "name": self.name,
                "enabled": self.enabled,
                "command": self.command,
                "args": self.args,
                "env": readable,
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
            "env": {key: SECRET_MASK for key in self.env},
            "trusted": self.trusted,
            "tool_parse_mode": self.tool_parse_mode,
            "timeout_seconds": self.timeout_seconds,
            "sandbox_paths": list(self.sandbox_paths),
        }
