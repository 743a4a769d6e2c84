"""The ACP messages agentsite exchanges with runners, as pydantic models (wire form: camelCase).

Only what the client uses is modelled: `initialize`, `session/new`, `session/prompt`,
`session/cancel`, the `session/update` kinds users see, `session/request_permission` and `fs/*`.
Names, aliases and `PROTOCOL_VERSION` follow the ACP schema (agentclientprotocol.com); the tests
check them against the official SDK's models (tests/acp/test_acp_schema.py).

Runners are written against newer or older revisions of the protocol, so reading is forgiving the
way the ACP schema asks: unknown fields are ignored (kept, for `agentCapabilities`), a malformed
optional field falls back to its default, an unknown tool-call content item or plan entry is dropped,
and an unknown `session/update` kind parses as `OtherUpdate` instead of failing. Enumerations we do
not branch on (tool kinds, statuses, stop reasons) are plain strings for the same reason. Writing is
strict: `to_wire` sends exactly the fields defined here, by alias, without the unset optional ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic.alias_generators import to_camel

PROTOCOL_VERSION = 1

INITIALIZE = "initialize"
SESSION_NEW = "session/new"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_UPDATE = "session/update"
SESSION_REQUEST_PERMISSION = "session/request_permission"
FS_READ_TEXT_FILE = "fs/read_text_file"
FS_WRITE_TEXT_FILE = "fs/write_text_file"


class WireModel(BaseModel):
    """Base of every ACP message: snake_case in Python, camelCase on the wire, extras ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


def to_wire(model: BaseModel) -> dict[str, Any]:
    """The JSON object to send for `model`: aliases, and no unset optional (None) fields."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _salvaged(value: Any, handler: ValidatorFunctionWrapHandler, fallback: Callable[[], Any]) -> Any:
    """A malformed non-critical field becomes its default instead of failing the whole message."""
    try:
        return handler(value)
    except ValidationError:
        return fallback()


def _valid_items(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Drop list items that do not validate (e.g. a content type newer than this client)."""
    if not isinstance(value, list):
        return handler(value)
    kept: list[Any] = []
    for item in value:
        try:
            kept.extend(handler([item]))
        except ValidationError:
            continue
    return kept


# -- initialize ------------------------------------------------------------------------------------------


class Implementation(WireModel):
    """Who is speaking (`clientInfo` / `agentInfo`)."""

    name: str
    version: str
    title: str | None = None


class FileSystemCapabilities(WireModel):
    read_text_file: bool = False
    write_text_file: bool = False


class ClientCapabilities(WireModel):
    """Only `fs` is advertised: terminals are not offered to runners."""

    fs: FileSystemCapabilities = Field(default_factory=FileSystemCapabilities)


class PromptCapabilities(WireModel):
    model_config = ConfigDict(extra="allow")

    image: bool = False
    audio: bool = False
    embedded_context: bool = False

    @field_validator("image", "audio", "embedded_context", mode="wrap")
    @classmethod
    def _salvage(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _salvaged(value, handler, lambda: False)


class AgentCapabilities(WireModel):
    """What the runner supports; fields this client does not know stay in `model_extra`."""

    model_config = ConfigDict(extra="allow")

    load_session: bool = False
    prompt_capabilities: PromptCapabilities = Field(default_factory=PromptCapabilities)

    @field_validator("load_session", mode="wrap")
    @classmethod
    def _salvage_flag(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _salvaged(value, handler, lambda: False)

    @field_validator("prompt_capabilities", mode="wrap")
    @classmethod
    def _salvage_prompt(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _salvaged(value, handler, PromptCapabilities)


class InitializeRequest(WireModel):
    protocol_version: int
    client_capabilities: ClientCapabilities = Field(default_factory=ClientCapabilities)
    client_info: Implementation | None = None


class InitializeResponse(WireModel):
    protocol_version: int
    agent_capabilities: AgentCapabilities = Field(default_factory=AgentCapabilities)
    agent_info: Implementation | None = None

    @field_validator("agent_capabilities", mode="wrap")
    @classmethod
    def _salvage_capabilities(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _salvaged(value, handler, AgentCapabilities)

    @field_validator("agent_info", mode="wrap")
    @classmethod
    def _salvage_info(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _salvaged(value, handler, lambda: None)


# -- sessions and prompts ------------------------------------------------------------------------------


class NewSessionRequest(WireModel):
    cwd: str
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)  # required on the wire, even empty


class NewSessionResponse(WireModel):
    session_id: str


class ContentBlock(WireModel):
    """A content block. Only `text` blocks are read; others (image, resource ...) are named by type."""

    type: str
    text: str | None = None


def text_block(text: str) -> ContentBlock:
    return ContentBlock(type="text", text=text)


class PromptRequest(WireModel):
    session_id: str
    prompt: list[ContentBlock]


class PromptResponse(WireModel):
    stop_reason: str  # end_turn | max_tokens | max_turn_requests | refusal | cancelled (or newer)


class CancelNotification(WireModel):
    session_id: str


# -- tool calls ------------------------------------------------------------------------------------------


class ContentToolCallContent(WireModel):
    type: Literal["content"]
    content: ContentBlock


class FileEditToolCallContent(WireModel):
    type: Literal["diff"]
    path: str
    new_text: str
    old_text: str | None = None


class TerminalToolCallContent(WireModel):
    type: Literal["terminal"]
    terminal_id: str


ToolCallContent = Annotated[
    ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent, Field(discriminator="type")
]


class ToolCallLocation(WireModel):
    path: str
    line: int | None = None


class _ToolCallFields(WireModel):
    """What a tool call and its updates share; everything but the id is optional in an update.

    ACP requires a `title` on `tool_call`; a runner that leaves it out still gets its call shown.
    """

    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None
    raw_output: Any = None

    @field_validator("kind", "status", "title", mode="wrap")
    @classmethod
    def _salvage(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _salvaged(value, handler, lambda: None)

    @field_validator("content", "locations", mode="wrap")
    @classmethod
    def _skip_invalid(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _valid_items(value, handler)


class ToolCallUpdate(_ToolCallFields):
    """The tool call a permission request is about (`toolCall`)."""


class PermissionOption(WireModel):
    option_id: str
    name: str
    kind: str  # allow_once | allow_always | reject_once | reject_always


class RequestPermissionRequest(WireModel):
    session_id: str
    tool_call: ToolCallUpdate
    options: list[PermissionOption]


class SelectedOutcome(WireModel):
    outcome: Literal["selected"] = "selected"
    option_id: str


class CancelledOutcome(WireModel):
    outcome: Literal["cancelled"] = "cancelled"


class RequestPermissionResponse(WireModel):
    outcome: Annotated[SelectedOutcome | CancelledOutcome, Field(discriminator="outcome")]


# -- files -----------------------------------------------------------------------------------------------


class ReadTextFileRequest(WireModel):
    session_id: str
    path: str
    line: int | None = Field(default=None, ge=0)
    limit: int | None = Field(default=None, ge=0)


class ReadTextFileResponse(WireModel):
    content: str


class WriteTextFileRequest(WireModel):
    session_id: str
    path: str
    content: str


class WriteTextFileResponse(WireModel):
    """Empty on the wire (`{}`)."""


# -- session/update --------------------------------------------------------------------------------------


class AgentMessageChunk(WireModel):
    session_update: Literal["agent_message_chunk"] = "agent_message_chunk"
    content: ContentBlock


class AgentThoughtChunk(WireModel):
    session_update: Literal["agent_thought_chunk"] = "agent_thought_chunk"
    content: ContentBlock


class PlanEntry(WireModel):
    content: str
    status: str  # pending | in_progress | completed
    priority: str | None = None


class AgentPlanUpdate(WireModel):
    session_update: Literal["plan"] = "plan"
    entries: list[PlanEntry]

    @field_validator("entries", mode="wrap")
    @classmethod
    def _skip_invalid(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _valid_items(value, handler)


class ToolCallStart(_ToolCallFields):
    session_update: Literal["tool_call"] = "tool_call"


class ToolCallProgress(_ToolCallFields):
    session_update: Literal["tool_call_update"] = "tool_call_update"


class OtherUpdate(WireModel):
    """Any other update kind (user_message_chunk, current_mode_update, newer ones): not shown."""

    model_config = ConfigDict(extra="allow")

    session_update: str


_UPDATE_MODELS: dict[str, type[WireModel]] = {
    "agent_message_chunk": AgentMessageChunk,
    "agent_thought_chunk": AgentThoughtChunk,
    "plan": AgentPlanUpdate,
    "tool_call": ToolCallStart,
    "tool_call_update": ToolCallProgress,
}


def _update_tag(value: Any) -> str:
    """Pick the model by `sessionUpdate`; kinds this client does not model go to `OtherUpdate`."""
    if isinstance(value, dict):
        kind = value.get("sessionUpdate", value.get("session_update"))
    else:
        kind = getattr(value, "session_update", None)
    return kind if isinstance(kind, str) and kind in _UPDATE_MODELS else "other"


SessionUpdate = Annotated[
    Annotated[AgentMessageChunk, Tag("agent_message_chunk")]
    | Annotated[AgentThoughtChunk, Tag("agent_thought_chunk")]
    | Annotated[AgentPlanUpdate, Tag("plan")]
    | Annotated[ToolCallStart, Tag("tool_call")]
    | Annotated[ToolCallProgress, Tag("tool_call_update")]
    | Annotated[OtherUpdate, Tag("other")],
    Discriminator(_update_tag),
]

SESSION_UPDATE_ADAPTER: TypeAdapter[SessionUpdate] = TypeAdapter(SessionUpdate)


class SessionNotification(WireModel):
    session_id: str
    update: SessionUpdate
