"""Reads and writes of tool server configs (REST, the admin, the portal and the tools all come through
an app's `ToolServerStore`).

Secret fields are write-only (docs/protocol.md §6.3): a value sent as the mask ("***") keeps the stored
value of that name, so a client may PUT back what it read without wiping the secrets it was never shown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.db import transaction

from agents.models import Agent
from agents.toolservers.models import ToolServer
from security.secret_fields import SECRET_MASK, MaskWithoutValue, unmasked


class SecretKeepError(ValueError):
    """A value was sent as the mask ("***") for a name that has no stored value to keep."""

    def __init__(self, field: str, key: str, *, noun: str = "server") -> None:
        super().__init__(f"{key}: '{SECRET_MASK}' keeps a stored value, but this {noun} has none for {key}.")
        self.field = field
        self.key = key


def kept_secrets(
    field: str, sent: Mapping[str, str], stored: Mapping[str, str], *, noun: str = "server"
) -> dict[str, str]:
    """`sent` with every masked value replaced by the stored one."""
    try:
        return unmasked(sent, stored)
    except MaskWithoutValue as exc:
        raise SecretKeepError(field, exc.key, noun=noun) from None


# Called with the row about to be saved, the row as stored (None: a new one) and the new values.
BeforeSave = Callable[[Any, Any, dict[str, Any]], None]


class ToolServerStore[S: ToolServer]:
    """The rows of one kind of tool server. `noun`: how messages and URLs name one ("runner", "server");
    `label`: how a sentence begins with one ("Runner", "MCP server")."""

    def __init__(
        self, model: type[S], *, noun: str, label: str, before_save: BeforeSave | None = None
    ) -> None:
        self.model = model
        self.noun = noun
        self.label = label
        self.before_save = before_save

    def list(self, *, agent: Agent) -> dict[str, Any]:
        """Every server of the agent by name, in its wire form (`to_dict()`: secret values masked)."""
        return {server.name: server.to_dict() for server in self.model.objects.filter(agent=agent)}  # type: ignore[attr-defined]

    def get(self, *, agent: Agent, name: str) -> S | None:
        return self.model.objects.filter(agent=agent, name=name).first()  # type: ignore[attr-defined, no-any-return]

    def delete(self, *, agent: Agent, name: str) -> bool:
        """Delete a server; whether it existed. Its live connections end with their chat sessions."""
        deleted, _ = self.model.objects.filter(agent=agent, name=name).delete()  # type: ignore[attr-defined]
        return deleted > 0

    def kept(self, field: str, sent: Mapping[str, str], current: S | None) -> dict[str, str]:
        """A secret field's new value: masked values keep what `current` stores."""
        return kept_secrets(field, sent, dict(getattr(current, field)) if current else {}, noun=self.noun)

    @transaction.atomic
    def upsert(self, *, agent: Agent, name: str, data: Mapping[str, Any]) -> S:
        """Create or replace a server with validated `data` (a whole config; its fields are the model's)."""
        current = self.model.objects.select_for_update().filter(agent=agent, name=name).first()  # type: ignore[attr-defined]
        values = {key: list(value) if isinstance(value, list) else value for key, value in data.items()}
        for field in self.model.secret_fields:
            values[field] = self.kept(field, data.get(field, {}), current)
        server = current or self.model(agent=agent, name=name)
        if self.before_save is not None:
            self.before_save(server, current, values)
        for key, value in values.items():
            setattr(server, key, value)
        server.save()
        return server  # type: ignore[no-any-return]


def track_writes(model: type[ToolServer], *, object_type: str, also_exclude: tuple[str, ...] = ()) -> None:
    """Servers are site configuration: every save and delete is in the audit trail as `agent/name`
    (audit/tracking.py; secret values masked). `also_exclude`: what was found out about a
    server, which is not a change of it."""
    from audit.tracking import track

    track(
        model,
        object_type=object_type,
        object_id=lambda server: f"{server.agent_id}/{server.name}",
        exclude=("created_at", "updated_at", *also_exclude),
    )
