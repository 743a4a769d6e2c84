"""The turn contract: what a chat session's queue hands a turn and what it gets back.

`chat` (the queue, chat/live/controller.py) drives turns and `agents` (agents/turn.py) implements them;
both import these types from here, so neither reaches into the other. Plain Python, no Django.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, TypedDict

from agentsite.exceptions import DomainError

ApprovalMode = Literal["ask", "full_access", "read_only"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("ask", "full_access", "read_only")


@dataclass
class ChatRequest:
    message_id: str
    content: str
    config: dict[str, Any] | None = None
    approval_mode: ApprovalMode = "ask"
    model: str | None = None
    # Internal options, never set from a client frame or REST body (cron runs use them, cron/runner.py):
    # stream_events=False drops the streaming events (delta, thinking, tool_*, delegate_update) of this
    # message's turn, so sockets get only its final answer (dispatch mode "final"); confirmation_timeout
    # replaces AGENTSITE_CONFIRMATION_TIMEOUT for its confirmations (an unattended run waits up to its
    # job's timeout).
    stream_events: bool = True
    confirmation_timeout: float | None = None


@dataclass
class TurnResult:
    status: Literal["completed", "error"]
    final_content: str = ""
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, str] | None = None


class InputError(DomainError):
    """A queue command that cannot be applied (`code`: no_longer_pending, duplicate_message_id,
    session_closed, not_found, already_resolved, owner_unavailable, ...): REST answers with its status,
    a socket with an `error` frame to the sender."""

    status = 409
    statuses = {
        "not_found": 404,
        "invalid": 400,
        "too_long": 400,
        "model_not_allowed": 400,
        "owner_unavailable": 503,
        "queue_full": 429,
    }

    def __init__(self, code: str, message: str, *, message_id: str | None = None) -> None:
        super().__init__(message, code=code, message_id=message_id)


class Budget(Protocol):
    """Asked by a turn before each of its model calls after the first (the first is checked before the turn
    starts): the `{code, message}` that ends the turn there (`budget_exceeded`), or None to go on. The chat
    side implements it (chat/runtime.py `DailyBudget`; the rule is chat/usage.py `budget_refusal`), so a turn
    that crosses the daily budget stops after the call in flight (docs/protocol.md §6.6)."""

    async def __call__(self) -> dict[str, str] | None: ...


# -- what a turn yields (docs/protocol.md §3.3): TypedDicts, so the hot path stays plain dicts -------------


class DeltaEvent(TypedDict):
    type: Literal["delta"]
    content: str


class ThinkingEvent(TypedDict):
    type: Literal["thinking"]
    content: str


class ToolCallEvent(TypedDict):
    type: Literal["tool_call"]
    call_id: str
    name: str
    arguments: Any  # an object when the model sent a JSON object, else its raw text


class ToolResultEvent(TypedDict):
    type: Literal["tool_result"]
    call_id: str
    name: str
    output: str
    is_error: bool


class DelegateUpdateEvent(TypedDict):
    """An external agent's progress inside a tool call (acp/tool.py)."""

    type: Literal["delegate_update"]
    call_id: str | None
    runner: str
    update: dict[str, Any]


class ConfirmationRequestEvent(TypedDict):
    type: Literal["confirmation_request"]
    data: dict[str, Any]  # confirmation_id, kind, tool, arguments, reason; command, options, preview


class ConfirmationResolvedEvent(TypedDict):
    type: Literal["confirmation_resolved"]
    confirmation_id: str
    approved: bool
    by: str  # user, timeout, cancel, policy, ...
    option_id: NotRequired[str]


TurnEvent = (
    DeltaEvent
    | ThinkingEvent
    | ToolCallEvent
    | ToolResultEvent
    | DelegateUpdateEvent
    | ConfirmationRequestEvent
    | ConfirmationResolvedEvent
)


class StreamClosed(Exception):
    """TurnStream.steer raises it when the turn can no longer take input."""


class TurnStream(Protocol):
    def steer(self, text: str) -> None: ...
    def consume_inputs(self) -> list[str]: ...
    def take_pending(self) -> list[str]: ...
    def __aiter__(self) -> AsyncIterator[TurnEvent]: ...
    async def result(self) -> TurnResult: ...
    async def aclose(self) -> None: ...
    def resolve_confirmation(self, confirmation_id: str, approved: bool, option_id: str | None) -> None: ...


class Runtime(Protocol):
    """Opens a turn: `stream` is its one entry, called once per turn, when the turn is about to start and
    before its message is stored as running (chat/live/controller.py `_start`). It returns the stream, or
    an awaitable of it when opening needs I/O first: the runtime may start that I/O at once (it then runs
    alongside the write of the message), and the queue awaits the awaitable once, when the turn has its
    process slot. A turn cancelled before that never awaits it: an awaitable that is a coroutine is closed.

    `token`: the fencing token under which the caller owns the session (several processes; None: one
    process); every row the turn writes carries it, and is refused once another process owns the session.
    """

    def stream(
        self, request: ChatRequest, *, session_id: str, token: int | None = None
    ) -> TurnStream | Awaitable[TurnStream]: ...
