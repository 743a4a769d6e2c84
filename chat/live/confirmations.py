"""A session's confirmations, as its queue sees them: which are waiting for an answer, which were answered.

The turn holds the waiting futures (agents/turn.py); the controller forwards a reply only while its
confirmation waits, answers `already_resolved` for one it remembers, and shows the waiting ones in
snapshots. This is that memory: bounded, one per session.
"""

from __future__ import annotations

from typing import Any

from agents.contract import InputError, TurnEvent, TurnStream

RESOLVED_KEPT = 1024  # answered confirmation ids remembered, so a late reply gets "already_resolved"


class Confirmations:
    def __init__(self, kept: int = RESOLVED_KEPT) -> None:
        self._waiting: dict[str, dict[str, Any]] = {}
        self._resolved: dict[str, None] = {}
        self._kept = kept

    def asked(self, data: dict[str, Any]) -> None:
        """A `confirmation_request` went out: its data (as in the event) is kept for snapshots."""
        if "confirmation_id" in data:
            self._waiting[data["confirmation_id"]] = data

    def resolved(self, confirmation_id: Any) -> None:
        self._waiting.pop(confirmation_id, None)
        self._resolved[confirmation_id] = None
        while len(self._resolved) > self._kept:
            del self._resolved[next(iter(self._resolved))]

    def is_waiting(self, confirmation_id: str) -> bool:
        return confirmation_id in self._waiting

    def was_resolved(self, confirmation_id: str) -> bool:
        return confirmation_id in self._resolved

    def waiting_ids(self) -> list[str]:
        return list(self._waiting)

    def snapshot(self) -> list[dict[str, Any]]:
        return [dict(data) for data in self._waiting.values()]

    def track(self, event: TurnEvent) -> None:
        """Follow a turn's `confirmation_request` / `confirmation_resolved` events as they go out."""
        if event["type"] == "confirmation_request":
            self.asked(event["data"])
        elif event["type"] == "confirmation_resolved":
            self.resolved(event["confirmation_id"])

    def answer(
        self, stream: TurnStream | None, confirmation_id: str, approved: bool, option_id: str | None
    ) -> dict[str, Any]:
        """Hand the user's answer to the turn that asked (its waiting future); `already_resolved` for one
        answered before, `not_found` for one never asked."""
        if self.is_waiting(confirmation_id) and stream is not None:
            stream.resolve_confirmation(confirmation_id, approved, option_id)
            # Resolved now, not when the turn's event comes back: a second reply right after this one is
            # `already_resolved`, never handed to the turn.
            self.resolved(confirmation_id)
            reply: dict[str, Any] = {"confirmation_id": confirmation_id, "approved": approved}
            if option_id is not None:
                reply["option_id"] = option_id
            return reply
        if self.was_resolved(confirmation_id):
            raise InputError("already_resolved", f"Confirmation {confirmation_id} is already resolved.")
        raise InputError("not_found", f"Confirmation {confirmation_id} not found.")

    def end_all(self) -> list[dict[str, Any]]:
        """The turn ended with confirmations still open (cancel, close, failure): they are over, and every
        subscriber must be told, so dialogs close and snapshots stay true. The events to publish."""
        ended = []
        for confirmation_id in self.waiting_ids():
            self.resolved(confirmation_id)
            ended.append(
                {
                    "type": "confirmation_resolved",
                    "confirmation_id": confirmation_id,
                    "approved": False,
                    "by": "cancel",
                }
            )
        return ended
