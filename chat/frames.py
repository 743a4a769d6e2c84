"""Client → server WebSocket frames (PROTOCOL §3.2), validated strictly: no type coercion."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, TypeAdapter, ValidationError

MAX_CONTENT_CHARS = 100_000

MessageId = Annotated[StrictStr, Field(min_length=1, max_length=128)]
ApprovalMode = Literal["ask", "full_access", "read_only"]


class _Frame(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class Ping(_Frame):
    type: Literal["ping"]


class GenerationConfig(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    generation: dict[str, Any] = Field(default_factory=dict)


class MessageFrame(_Frame):
    type: Literal["message"]
    content: StrictStr
    message_id: MessageId | None = None
    steer: StrictBool = False
    config: GenerationConfig | None = None
    approval_mode: ApprovalMode = "ask"
    model: Annotated[StrictStr, Field(min_length=1, max_length=200)] | None = None


class SteerFrame(_Frame):
    type: Literal["steer"]
    message_id: MessageId


class RemoveFrame(_Frame):
    type: Literal["remove"]
    message_id: MessageId


class CancelFrame(_Frame):
    type: Literal["cancel"]


class ConfirmationReplyFrame(_Frame):
    type: Literal["confirmation_reply"]
    confirmation_id: Annotated[StrictStr, Field(min_length=1, max_length=128)]
    approved: StrictBool
    option_id: Annotated[StrictStr, Field(min_length=1, max_length=128)] | None = None


Frame = Annotated[
    Ping | MessageFrame | SteerFrame | RemoveFrame | CancelFrame | ConfirmationReplyFrame,
    Field(discriminator="type"),
]
KNOWN_TYPES = frozenset({"ping", "message", "steer", "remove", "cancel", "confirmation_reply"})
_adapter: TypeAdapter[Frame] = TypeAdapter(Frame)


class InvalidFrame(Exception):
    def __init__(self, message: str, code: str = "invalid_frame"):
        super().__init__(message)
        self.code = code
        self.message = message


def parse_frame(data: dict[str, Any]) -> Frame:
    """A typed frame, or InvalidFrame saying which field is wrong."""
    try:
        frame = _adapter.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "frame"
        raise InvalidFrame(f"Invalid '{data.get('type')}' frame: {where}: {first['msg']}.") from None
    if isinstance(frame, MessageFrame) and len(frame.content) > MAX_CONTENT_CHARS:
        raise InvalidFrame(
            f"Message content is {len(frame.content)} characters; the limit is {MAX_CONTENT_CHARS}.",
            code="too_long",
        )
    return frame
