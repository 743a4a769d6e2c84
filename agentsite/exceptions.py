"""The one domain error type: what went wrong, as a stable code, a sentence and an HTTP status.

Plain Python (no Django), so the turn loop and the queue can raise it too. Apps subclass it for their
own kinds (`chat/exceptions.py`, `cron/exceptions.py`, `InputError` of the turn contract); it is
translated in one place per edge: REST in `agentsite/errors.py`, sockets in `chat/consumers.py`.
"""

from __future__ import annotations

from typing import Any, ClassVar


class DomainError(Exception):
    """`code` (snake_case) and `message` (a sentence) reach the client; `status` is the HTTP status the
    REST edge answers with; `message_id` names the message a queue command was about; `fields` maps
    field names to problems (validation)."""

    code: str = "error"
    status: int = 400
    # Per-code statuses for a class that carries several codes (InputError).
    statuses: ClassVar[dict[str, int]] = {}

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        message_id: str | None = None,
        fields: dict[str, list[str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status if status is not None else self.statuses.get(self.code, type(self).status)
        self.message_id = message_id
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        """The `data` of an `error` frame / the `error` object of a REST answer."""
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.message_id is not None:
            data["message_id"] = self.message_id
        if self.fields:
            data["fields"] = self.fields
        return data


class LimitReached(DomainError):
    """A per-user limit (docs/protocol.md §6.4: sessions, cron jobs) is reached; the message names it."""

    code = "limit_reached"
    status = 400


def check_limit(count: int, limit: int, *, what: str, setting: str) -> None:
    """Raise LimitReached when a user who has `count` of `what` may not make one more (`limit` 0: none)."""
    if limit and count >= limit:
        raise LimitReached(
            f"You have {count} {what}: the limit is {limit} ({setting}). Delete some to make new ones."
        )


class RateExceeded(DomainError):
    """Too many of something in too short a time (docs/protocol.md §6.6: a user's socket frames): nothing
    was done; `retry_after` is how many seconds until one more is allowed."""

    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after: int, message_id: str | None = None) -> None:
        super().__init__(message, message_id=message_id)
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "retry_after": self.retry_after}


class ServiceUnavailable(DomainError):
    """A service the server depends on (the database, Redis) does not answer: try again (503; a socket
    gets `error unavailable` and close 1012)."""

    code = "unavailable"
    status = 503
