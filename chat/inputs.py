"""What clients send, validated one way for REST and sockets alike: strictly, with no type coercion.

A message (`POST …/messages` or a socket's `message` frame, docs/protocol.md §2, §3.2) is the same
`MessageInput` on both edges; socket frames add their `type`. Problems become `InvalidInput` (the field
and why, worded by agentsite/validation.py; REST answers `400 invalid` with `fields`, a socket an `error`
frame `invalid_frame` with the same `fields`) or `too_long` (content over 100,000 characters, both edges).
Every field of every frame is checked here, for whatever JSON a client sends (tests/chat/test_frames_fuzz.py):
no text may hold the NUL character, which no database column takes (a docs/protocol.md extension), and a
frame that is no frame of the contract (not a JSON object, or its `type` no known frame type, not a string
at all included) is told apart from one with wrong fields, so that the socket ignores it as the contract says.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from agents.contract import ApprovalMode
from agentsite.exceptions import DomainError
from agentsite.query import query_int
from agentsite.validation import InvalidInput as InvalidInput  # what the parsers below raise
from agentsite.validation import invalid, pydantic_fields

MAX_CONTENT_CHARS = 100_000
NUL = "\x00"


def _without_nul[T](value: T) -> T:
    """Text (also inside objects and lists, keys included) without NUL: Postgres stores none."""
    if isinstance(value, str):
        if NUL in value:
            raise ValueError("Text may not contain the NUL character (U+0000).")
    elif isinstance(value, dict):
        for key, inner in value.items():
            _without_nul(key)
            _without_nul(inner)
    elif isinstance(value, list):
        for inner in value:
            _without_nul(inner)
    return value


Text = Annotated[StrictStr, AfterValidator(_without_nul)]
MessageId = Annotated[Text, Field(min_length=1, max_length=128)]
ShortText = Annotated[Text, Field(min_length=1, max_length=128)]


class _Input(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class GenerationConfig(BaseModel):
    """`config`: only `generation` (options passed to the model: temperature, max_tokens, ...)."""

    model_config = ConfigDict(strict=True, extra="forbid")
    generation: Annotated[dict[str, Any], AfterValidator(_without_nul)] = Field(default_factory=dict)


class MessageInput(_Input):
    """A user message for a session's queue."""

    content: Annotated[Text, Field(min_length=1)]
    message_id: MessageId | None = None
    steer: StrictBool = False
    config: GenerationConfig | None = None
    approval_mode: ApprovalMode = "ask"
    model: Annotated[Text, Field(min_length=1, max_length=200)] | None = None

    def submit_options(self) -> dict[str, Any]:
        """The keyword arguments of chat.services.message_submit."""
        return {
            "content": self.content,
            "message_id": self.message_id,
            "steer": self.steer,
            "config": self.config.model_dump() if self.config else None,
            "approval_mode": self.approval_mode,
            "model": self.model,
        }


class ConfirmationReplyInput(_Input):
    approved: StrictBool
    option_id: ShortText | None = None


# -- socket frames (docs/protocol.md §3.2) ---------------------------------------------------------


class Ping(_Input):
    type: Literal["ping"]


class MessageFrame(MessageInput):
    type: Literal["message"]


class SteerFrame(_Input):
    type: Literal["steer"]
    message_id: MessageId


class RemoveFrame(_Input):
    type: Literal["remove"]
    message_id: MessageId


class CancelFrame(_Input):
    type: Literal["cancel"]


class ConfirmationReplyFrame(ConfirmationReplyInput):
    type: Literal["confirmation_reply"]
    confirmation_id: ShortText


Frame = Annotated[
    Ping | MessageFrame | SteerFrame | RemoveFrame | CancelFrame | ConfirmationReplyFrame,
    Field(discriminator="type"),
]
KNOWN_TYPES = frozenset({"ping", "message", "steer", "remove", "cancel", "confirmation_reply"})
_frames: TypeAdapter[Frame] = TypeAdapter(Frame)


def parse_frame(data: Any) -> Frame | None:
    """A typed frame of a known type; None for what the contract ignores (docs/protocol.md §3.2): JSON that
    is not an object, or an object whose `type` is no known frame type (`{"type": {}}` included). A known
    frame with a field missing or wrong: InvalidInput naming it; content over the limit: `too_long`."""
    if not isinstance(data, dict):
        return None
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in KNOWN_TYPES:
        return None
    return _checked(_validate(_frames, data, skip_first=True))


def parse_message(data: Any) -> MessageInput:
    """A message body (REST), or InvalidInput / `too_long`."""
    return _checked(_validate(TypeAdapter(MessageInput), data))


def parse[T](model: type[T], data: Any) -> T:
    """Any other body (REST), or InvalidInput."""
    return _validate(TypeAdapter(model), data)


def _validate[T](adapter: TypeAdapter[T], data: Any, *, skip_first: bool = False) -> T:
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise invalid(pydantic_fields(exc, skip=1 if skip_first else 0)) from None


def _checked[T](value: T) -> T:
    content = getattr(value, "content", None)
    if isinstance(value, MessageInput) and isinstance(content, str) and len(content) > MAX_CONTENT_CHARS:
        limit = f"Message content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}."
        raise DomainError(limit, code="too_long")
    return value


def parse_since(raw: str | None) -> int | None:
    """`?since=` (or SSE's `Last-Event-ID`), read one way by the socket and the SSE stream (docs/protocol.md
    §3.1): None when absent; a seq, strictly an integer (below 0: from the start, 0); anything else is
    InvalidInput (REST 400, a socket `error` `invalid` and close 4400), never a silent full replay."""
    if raw is None:
        return None
    return max(query_int(raw, "since", "Must be an integer event seq."), 0)
