"""The queue commands a live session takes, and their plain-data form for other processes.

Every edge (socket frame, REST call, cron run) turns its input into one of these and hands it to the
live sessions (chat/live/sessions.py), which run it on the session's controller wherever it lives.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agents.contract import ChatRequest


@dataclass(frozen=True)
class Submit:
    """Queue a message. `stored`: its row was written already (by the process that received it)."""

    request: ChatRequest
    steer: bool = False
    stored: bool = False


@dataclass(frozen=True)
class Steer:
    message_id: str


@dataclass(frozen=True)
class Remove:
    message_id: str


@dataclass(frozen=True)
class Cancel:
    pass


@dataclass(frozen=True)
class ConfirmationReply:
    confirmation_id: str
    approved: bool
    option_id: str | None = None


Command = Submit | Steer | Remove | Cancel | ConfirmationReply
_KINDS: dict[str, type[Any]] = {
    "Steer": Steer,
    "Remove": Remove,
    "Cancel": Cancel,
    "ConfirmationReply": ConfirmationReply,
}


def encode_command(command: Command) -> dict[str, Any]:
    """A command as plain data for the channel layer."""
    return {"kind": type(command).__name__, **asdict(command)}


def decode_command(data: dict[str, Any]) -> Command:
    data = dict(data)
    kind = data.pop("kind")
    if kind == "Submit":
        return Submit(request=ChatRequest(**data["request"]), steer=data["steer"], stored=data["stored"])
    return _KINDS[kind](**data)  # type: ignore[no-any-return]
