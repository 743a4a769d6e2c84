"""The configuration row every external tool server has (docs/protocol.md §2 "ACP runners", "MCP servers").

`ToolServer` is abstract: each app's table keeps its own name, related name and constraint names, and
the fields declared here are the ones both tables always had, so sharing them changed no schema. `env`
values (and any other field in `secret_fields`) are secrets: stored encrypted, write-only everywhere
(docs/protocol.md §6.3). JSON columns are read through a pydantic `ToolServerConfig`, so a row edited
by hand into the wrong shape fails loudly with the server's name instead of starting nonsense.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pydantic
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from agents.models import NAME_PATTERN, Agent
from security.encryption import is_unreadable
from security.secret_fields import SECRET_MASK, EncryptedJSONDictField

name_validator = RegexValidator(NAME_PATTERN, "Use 1-64 letters, digits, '_' or '-'.")

SANDBOX_PATHS_HELP = (
    "More host paths the runner's program needs, shown read-only in its sandbox (its "
    "executable and installation are shown automatically). Never the data directory or the code."
)


class ToolServerConfig(pydantic.BaseModel):
    """A row's settings in typed form: what is started (or reached) and how far it is trusted."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    enabled: bool
    command: str
    args: list[str]
    env: dict[str, str]
    trusted: bool
    timeout_seconds: int = pydantic.Field(gt=0)
    sandbox_paths: list[str] = []


class ToolServer(models.Model):
    """One external tool server an agent may use. Subclasses add `agent = ToolServer.agent_field(...)`,
    `trusted`, `timeout_seconds = ToolServer.timeout_field(...)`, their protocol's fields and
    `Meta.constraints` (`ToolServer.table_constraints(...)` and their own)."""

    secret_fields: ClassVar[tuple[str, ...]] = ("env",)  # JSON objects whose values are write-only

    agent_id: str
    name = models.CharField(max_length=64, validators=[name_validator])
    enabled = models.BooleanField(default=False)
    command = models.CharField(max_length=1000, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = EncryptedJSONDictField(default=dict, blank=True)  # values encrypted (docs/protocol.md §6.3)
    sandbox_paths = models.JSONField(default=list, blank=True, help_text=SANDBOX_PATHS_HELP)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["agent", "name"]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.name}"

    @staticmethod
    def agent_field(related_name: str) -> models.ForeignKey[Agent, Agent]:
        """The agent a server belongs to (each app names the reverse: `acp_runners`, `mcp_servers`)."""
        return models.ForeignKey(Agent, on_delete=models.CASCADE, related_name=related_name)

    @staticmethod
    def timeout_field(default: int) -> models.PositiveIntegerField[int, int]:
        """Seconds one call (a prompt, a tool call) may take; at least 1."""
        return models.PositiveIntegerField(default=default, validators=[MinValueValidator(1)])

    @staticmethod
    def table_constraints(prefix: str) -> list[models.BaseConstraint]:
        """One server of a name per agent, and a positive timeout (`prefix` names them per table)."""
        return [
            models.UniqueConstraint(fields=["agent", "name"], name=f"{prefix}_unique_name"),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__gte=1), name=f"{prefix}_timeout_positive"
            ),
        ]

    def masked(self, field: str) -> dict[str, str]:
        """A secret field as every answer shows it: its names, each value the mask."""
        return {key: SECRET_MASK for key in getattr(self, field)}

    def readable(self, field: str) -> tuple[Any, list[str]]:
        """A secret field's values a key opens, and the names of those none does (security/encryption.py;
        not a dict: a malformed row, left for the config's validation)."""
        secrets = getattr(self, field)
        if not isinstance(secrets, dict):
            return secrets, []
        unreadable = sorted(key for key, value in secrets.items() if is_unreadable(value))
        return {key: value for key, value in secrets.items() if key not in unreadable}, unreadable
